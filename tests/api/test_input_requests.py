"""Input requests: the client that acked a call asks the person (a form or a page, as MCP elicitation does),
anyone holding the session's token answers, the first answer wins, and the call's result deadline and
heartbeat wait meanwhile."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from switchboard.settings import Settings
from tests.api.test_inbox import inbox, notices
from tests.api.test_pools import member
from tests.api.test_webhooks import endpoint
from tests.api_client import Api, Event, Session, of_type, run_over, running_api, whole_log
from tests.helpers import HIGHLIGHT
from tests.webhook_receiver import Receiver, receiving
from workers.inbox_notices import inbox_consumer

pytestmark = pytest.mark.both_redis

CALL = '/call client__web__highlight_row {"row_id": "7"}'
FORM = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "title": "Amount", "minimum": 0, "maximum": 1000},
        "account": {"type": "string", "enum": ["checking", "savings"]},
        "confirm": {"type": "boolean"},
        "count": {"type": "integer"},
        "email": {"type": "string", "format": "email", "maxLength": 64},
    },
    "required": ["amount", "confirm"],
}
ASK = {"message": "Transfer how much, from which account?", "schema": FORM}


def tool(**deadlines: int) -> dict[str, Any]:
    return {**HIGHLIGHT, **deadlines}


async def extended(api: Api, session: Session) -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    return await whole_log(lambda params: api.key.get(path, params={**params, "include": "extensions"}))


async def acked_call(api: Api, session: Session, client_id: str, *, ack: bool = True) -> str:
    await api.send(session, CALL)
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call_id = str(of_type(events, "client_tool_dispatched")[0]["call_id"])
    if ack:
        assert (await api.call(session, client_id, call_id, "ack")).status_code == 200
    return call_id


async def ask(api: Api, session: Session, client_id: str, call_id: str, body: dict[str, Any]) -> httpx.Response:
    path = f"/v1/sessions/{session.id}/clients/{client_id}/calls/{call_id}/input-requests"
    async with api.as_session(session) as client:
        return await client.post(path, json=body)


async def answer(api: Api, session: Session, request_id: str, body: dict[str, Any]) -> httpx.Response:
    async with api.as_session(session) as client:
        return await client.post(f"/v1/sessions/{session.id}/input-requests/{request_id}", json=body)


async def read(api: Api, session: Session, request_id: str) -> httpx.Response:
    async with api.as_session(session) as client:
        return await client.get(f"/v1/sessions/{session.id}/input-requests/{request_id}")


async def test_a_client_asks_the_person_and_the_first_answer_reaches_it(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    call_id = await acked_call(api, session, web["id"])

    asked = await ask(api, session, web["id"], call_id, ASK)
    assert asked.status_code == 201, asked.text
    request_id = asked.json()["request_id"]
    assert asked.json() == {"request_id": request_id, "key": request_id}
    opened = await read(api, session, request_id)
    assert opened.json() == {
        "request_id": request_id,
        "key": request_id,
        "call_id": call_id,
        "state": "open",
        "action": None,
        "content": None,
    }

    content = {"amount": 12.5, "account": "savings", "confirm": True, "count": 3}
    async with api.stream(session, include="extensions") as frames:
        answered = await answer(api, session, request_id, {"action": "accept", "content": content})
        assert answered.status_code == 200, answered.text
        provided = answered.json()
        assert provided == provided | {
            "type": "input_provided",
            "request_id": request_id,
            "call_id": call_id,
            "client_id": web["id"],
            "action": "accept",
            "content": content,
        }
        assert "reason" not in provided
        seen = await frames.event()
        while seen["type"] != "input_provided":
            seen = await frames.event()
        assert seen["request_id"] == request_id
    again = await answer(api, session, request_id, {"action": "decline"})
    assert again.status_code == 409
    assert "already answered" in again.json()["error"]["message"]
    done = (await read(api, session, request_id)).json()
    assert (done["state"], done["action"], done["content"]) == ("answered", "accept", content)

    assert (await api.call(session, web["id"], call_id, "result", text="sent")).status_code == 204
    events = await api.wait_for(session, run_over)
    # Extensions: the default view carries neither event.
    assert not of_type(events, "input_requested")
    assert not of_type(events, "input_provided")
    (requested,) = of_type(await extended(api, session), "input_requested")
    assert requested == requested | {
        "request_id": request_id,
        "call_id": call_id,
        "client_id": web["id"],
        "tool": "highlight_row",
        "key": request_id,
        "message": ASK["message"],
        "schema": FORM,
        "source": "client",
    }
    assert "url" not in requested


async def test_url_mode_keys_and_declines(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    call_id = await acked_call(api, session, web["id"])
    page = {"message": "Sign in to your bank", "url": "https://bank.example.com/auth?state=1", "key": "bank-login"}
    asked = await ask(api, session, web["id"], call_id, page)
    assert asked.status_code == 201, asked.text
    assert asked.json()["key"] == "bank-login"
    taken = await ask(api, session, web["id"], call_id, {**page, "url": "https://other.example.com"})
    assert taken.status_code == 409
    assert "bank-login" in taken.json()["error"]["message"]
    (requested,) = of_type(await extended(api, session), "input_requested")
    assert (requested["url"], requested["key"]) == (page["url"], "bank-login")
    assert "schema" not in requested
    request_id = asked.json()["request_id"]
    with_content = await answer(api, session, request_id, {"action": "accept", "content": {"x": 1}})
    assert with_content.status_code == 400
    accepted = await answer(api, session, request_id, {"action": "accept"})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["content"] is None

    second = await ask(api, session, web["id"], call_id, ASK)
    declined = await answer(api, session, second.json()["request_id"], {"action": "decline"})
    assert declined.status_code == 200, declined.text
    assert (declined.json()["action"], declined.json()["content"]) == ("decline", None)


async def test_who_may_ask_and_when(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    other = await api.register(session, name="other")
    call_id = await acked_call(api, session, web["id"], ack=False)

    early = await ask(api, session, web["id"], call_id, ASK)
    assert early.status_code == 409
    assert "not acknowledged yet" in early.json()["error"]["message"]
    assert (await api.call(session, web["id"], call_id, "ack")).status_code == 200
    theirs = await ask(api, session, other["id"], call_id, ASK)
    assert theirs.status_code == 409
    assert "not this client's" in theirs.json()["error"]["message"]
    unknown = await ask(api, session, web["id"], "call_unknown", ASK)
    assert unknown.status_code == 404
    no_request = await read(api, session, "0190a0a0-0000-7000-8000-000000000000")
    assert no_request.status_code == 404
    nowhere = await answer(api, session, "0190a0a0-0000-7000-8000-000000000000", {"action": "cancel"})
    assert nowhere.status_code == 404

    for method in ("sampling/createMessage", "roots/list"):
        refused = await ask(api, session, web["id"], call_id, {"method": method, "params": {}})
        assert refused.status_code == 409
        assert refused.json()["error"]["message"].startswith("Client does not support ")
        assert f"(required for {method})" in refused.json()["error"]["message"]

    ids = []
    for _ in range(4):
        asked = await ask(api, session, web["id"], call_id, ASK)
        assert asked.status_code == 201, asked.text
        ids.append(asked.json()["request_id"])
    fifth = await ask(api, session, web["id"], call_id, ASK)
    assert fifth.status_code == 429
    assert "Retry-After" in fifth.headers
    assert (await answer(api, session, ids[0], {"action": "cancel"})).status_code == 200
    assert (await ask(api, session, web["id"], call_id, ASK)).status_code == 201

    assert (await api.call(session, web["id"], call_id, "result", text="done")).status_code == 204
    settled = await ask(api, session, web["id"], call_id, ASK)
    assert settled.status_code == 409
    assert "already has a result" in settled.json()["error"]["message"]
    # Nothing of the refused asks was written: the four and the one after the cancel.
    assert len(of_type(await extended(api, session), "input_requested")) == 5


async def test_open_requests_end_with_their_call(api: Api) -> None:
    consume = inbox_consumer(api.stack.broker.inbox)
    session = await api.session()
    web = await api.register(session)
    call_id = await acked_call(api, session, web["id"])
    first = (await ask(api, session, web["id"], call_id, ASK)).json()["request_id"]
    second = (await ask(api, session, web["id"], call_id, {**ASK, "key": "again"})).json()["request_id"]
    for notice in notices(session, await extended(api, session), None):
        await consume(notice)
    items = [item for item in await inbox(api, kind="input") if item["session_id"] == session.id]
    assert sorted(item["request_id"] for item in items) == sorted([first, second])
    assert {(item["call_id"], item["tool"], item["kind"]) for item in items} == {(call_id, "highlight_row", "input")}

    assert (await api.call(session, web["id"], call_id, "result", text="done")).status_code == 204
    await api.wait_for(session, run_over)
    events = await extended(api, session)
    ended = of_type(events, "input_provided")
    assert [(e["request_id"], e["action"], e["content"], e["reason"]) for e in ended] == [
        (first, "cancel", None, "call_settled"),
        (second, "cancel", None, "call_settled"),
    ]
    # After the call's result: the requests ended with it.
    assert [e["type"] for e in events].index("tool_result") < [e["type"] for e in events].index("input_provided")
    for request_id in (first, second):
        state = (await read(api, session, request_id)).json()
        assert (state["state"], state["action"]) == ("cancelled", None)
    late = await answer(api, session, first, {"action": "decline"})
    assert late.status_code == 409
    assert "ended with its call" in late.json()["error"]["message"]
    for notice in notices(session, events, None):
        await consume(notice)
    assert not [item for item in await inbox(api, kind="input") if item["session_id"] == session.id]


async def test_the_first_answer_wins_a_race(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    call_id = await acked_call(api, session, web["id"])
    request_id = (await ask(api, session, web["id"], call_id, ASK)).json()["request_id"]
    bodies = [{"action": "accept", "content": {"amount": n, "confirm": True}} for n in range(6)]
    answers = await asyncio.gather(*(answer(api, session, request_id, body) for body in bodies))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] + [409] * 5, [a.text for a in answers]
    (won,) = [a for a in answers if a.status_code == 200]
    assert (await read(api, session, request_id)).json()["content"] == won.json()["content"]
    assert len(of_type(await extended(api, session), "input_provided")) == 1


@pytest.mark.short_deadlines
async def test_an_open_request_pauses_the_result_deadline(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    call_id = await acked_call(api, session, web["id"])
    request_id = (await ask(api, session, web["id"], call_id, ASK)).json()["request_id"]
    # Past the deployment's result deadline (1 s in these tests) while the person decides.
    await asyncio.sleep(1.6)
    assert not of_type(await api.events(session), "client_tool_failed")
    answered = await answer(api, session, request_id, {"action": "decline"})
    assert answered.status_code == 200, answered.text
    # The deadline runs again once answered, for what was left of it.
    events = await api.wait_for(session, run_over, timeout=5)
    (failure,) = of_type(events, "client_tool_failed")
    assert failure["reason"] == "result_timeout"


@pytest.mark.short_deadlines
async def test_an_open_request_pauses_the_heartbeat_but_not_the_tools_timeout(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[tool(heartbeat_s=1, timeout_s=60)])
    call_id = await acked_call(api, session, web["id"])
    request_id = (await ask(api, session, web["id"], call_id, ASK)).json()["request_id"]
    await asyncio.sleep(1.6)
    assert not of_type(await api.events(session), "client_tool_failed")
    assert (await answer(api, session, request_id, {"action": "cancel"})).status_code == 200
    # A whole heartbeat from the answer, then the call fails for want of one.
    events = await api.wait_for(session, run_over, timeout=5)
    (failure,) = of_type(events, "client_tool_failed")
    assert failure["reason"] == "result_timeout"

    timed = await api.session()
    short = await api.register(timed, tools=[tool(timeout_s=1)])
    timed_call = await acked_call(api, timed, short["id"])
    open_id = (await ask(api, timed, short["id"], timed_call, ASK)).json()["request_id"]
    events = await api.wait_for(timed, run_over, timeout=5)
    assert of_type(events, "client_tool_failed")[0]["reason"] == "result_timeout"
    assert (await read(api, timed, open_id)).json()["state"] == "cancelled"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"message": "which?"},
        {"schema": FORM},
        {"message": "which?", "schema": FORM, "url": "https://example.com"},
        {"message": "x" * 2001, "schema": FORM},
        {"message": "which?", "schema": {"type": "object", "properties": {"p": {"type": "string", "x": "y" * 17_000}}}},
        {"message": "which?", "schema": {"type": "object", "properties": {"p": {"type": "object"}}}},
        {"message": "which?", "schema": {"type": "object", "properties": {"p": {"type": "array"}}}},
        {"message": "which?", "schema": {"type": "array"}},
        {"message": "which?", "schema": {"type": "object", "properties": {}, "required": ["q"]}},
        {"message": "which?", "schema": {"type": "object", "properties": {"p": {"type": "string", "enum": [1]}}}},
        {"message": "which?", "schema": {"type": "object", "properties": {"p": {"type": "string", "pattern": "a"}}}},
        {"message": "which?", "url": "ftp://example.com/file"},
        {"message": "which?", "url": "not a url"},
        {"message": "which?", "schema": FORM, "params": {}},
        {"message": "which?", "schema": FORM, "key": "has space"},
        {"message": "which?", "schema": FORM, "key": "k" * 129},
        {"message": "which?", "schema": FORM, "extra": 1},
        {"method": "elicitation/create", "params": {}},
        {"method": "roots/list", "message": "which?"},
        {"message": 5, "schema": FORM},
    ],
)
async def test_bad_asks_are_400_and_write_nothing(api: Api, body: dict[str, Any]) -> None:
    session = await api.session()
    web = await api.register(session)
    call_id = await acked_call(api, session, web["id"])
    refused = await ask(api, session, web["id"], call_id, body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "invalid_request"
    assert not of_type(await extended(api, session), "input_requested")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "accept", "content": {"amount": "12", "confirm": True}}, "content.amount"),
        ({"action": "accept", "content": {"amount": 1001, "confirm": True}}, "content.amount"),
        ({"action": "accept", "content": {"amount": 1, "confirm": "yes"}}, "content.confirm"),
        ({"action": "accept", "content": {"amount": 1}}, "content.confirm"),
        ({"action": "accept", "content": {"amount": 1, "confirm": True, "count": 1.5}}, "content.count"),
        ({"action": "accept", "content": {"amount": 1, "confirm": True, "account": "gold"}}, "content.account"),
        ({"action": "accept", "content": {"amount": 1, "confirm": True, "email": "nope"}}, "content.email"),
        ({"action": "accept", "content": {"amount": 1, "confirm": True, "other": 1}}, "content.other"),
        ({"action": "accept"}, "content.amount"),
        ({"action": "decline", "content": {"amount": 1}}, "content"),
        ({"action": "maybe"}, "action"),
        ({"action": "accept", "content": [1]}, "content"),
        ({"action": "accept", "content": {"amount": 1, "confirm": True}, "extra": 1}, "extra"),
    ],
)
async def test_bad_answers_are_400_naming_the_field_and_leave_the_request_open(
    api: Api, body: dict[str, Any], field: str
) -> None:
    session = await api.session()
    web = await api.register(session)
    call_id = await acked_call(api, session, web["id"])
    request_id = (await ask(api, session, web["id"], call_id, ASK)).json()["request_id"]
    refused = await answer(api, session, request_id, body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"].startswith(field), refused.text
    assert (await read(api, session, request_id)).json()["state"] == "open"
    assert not of_type(await extended(api, session), "input_provided")


async def test_a_pool_member_hears_the_answer_on_its_call_stream(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    async with member(api, session, web["id"]) as pooled:
        await api.send(session, CALL)
        call_id = (await pooled.next_call())["call_id"]
        assert (await pooled.ack(call_id)).status_code == 200
        request_id = (await ask(api, session, web["id"], call_id, ASK)).json()["request_id"]
        content = {"amount": 5, "confirm": False}
        assert (await answer(api, session, request_id, {"action": "accept", "content": content})).status_code == 200
        heard = await pooled.frames.event()
        assert heard == heard | {"type": "input_provided", "request_id": request_id, "content": content}


async def test_a_call_that_goes_back_to_waiting_for_its_client_ends_its_requests(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[{**HIGHLIGHT, "on_leave": "wait"}])
    call_id = await acked_call(api, session, web["id"])
    request_id = (await ask(api, session, web["id"], call_id, ASK)).json()["request_id"]
    async with api.as_session(session) as client:
        left = await client.delete(f"/v1/sessions/{session.id}/clients/{web['id']}")
        assert left.status_code == 204, left.text
    (ended,) = of_type(await extended(api, session), "input_provided")
    assert (ended["request_id"], ended["action"], ended["reason"]) == (request_id, "cancel", "call_waiting")
    assert (await read(api, session, request_id)).json()["state"] == "cancelled"
    # The next registration of the name gets the call again and may ask anew, under the same key even.
    again = await api.register(session, tools=[{**HIGHLIGHT, "on_leave": "wait"}])
    await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 2)
    assert (await api.call(session, again["id"], call_id, "ack")).status_code == 200
    assert (await ask(api, session, again["id"], call_id, {**ASK, "key": "fresh"})).status_code == 201


class TestWebhooks:
    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        # The receiver listens on 127.0.0.1.
        return settings.model_copy(update={"provider_allow_private": True, "webhook_timeout_s": 2.0})

    @pytest.fixture
    async def receiver(self) -> AsyncIterator[Receiver]:
        async with receiving() as running:
            yield running

    async def test_a_request_reaches_its_webhook_and_the_inbox_until_answered(
        self, api: Api, receiver: Receiver
    ) -> None:
        created = await endpoint(api, receiver.url("/inputs"), ["input.requested"])
        session = await api.session()
        web = await api.register(session)
        call_id = await acked_call(api, session, web["id"])
        request_id = (await ask(api, session, web["id"], call_id, ASK)).json()["request_id"]
        (got,) = await receiver.wait("/inputs")
        payload = Webhook(created["secret"]).verify(got.body, got.headers)
        assert payload["type"] == "input.requested"
        assert payload["data"]["event"] == payload["data"]["event"] | {
            "type": "input_requested",
            "request_id": request_id,
        }
        assert payload["data"]["run_id"] is not None

        async def items() -> list[str | None]:
            found = await inbox(api, kind="input")
            return [item["request_id"] for item in found if item["session_id"] == session.id]

        until = time.monotonic() + 10
        while await items() != [request_id]:
            assert time.monotonic() < until
            await asyncio.sleep(0.05)
        assert (await answer(api, session, request_id, {"action": "decline"})).status_code == 200
        while await items():
            assert time.monotonic() < until + 10
            await asyncio.sleep(0.05)


async def test_a_forgotten_call_takes_its_requests_and_their_storage(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    update: dict[str, object] = {"settled_call_retention_s": 1.0}
    async with running_api(settings, redis_url, api_key, update) as trimmed:
        session = await trimmed.session()
        s = trimmed.stack.broker.core.keys.session(session.id)
        redis = trimmed.stack.broker.core.client_for(s.inputs)
        web = await trimmed.register(session)
        call_id = await acked_call(trimmed, session, web["id"])
        before = int(await redis.hget(s.meta, "bytes") or 0)
        first = (await ask(trimmed, session, web["id"], call_id, ASK)).json()["request_id"]
        second = (await ask(trimmed, session, web["id"], call_id, {**ASK, "key": "k2"})).json()["request_id"]
        assert (await answer(trimmed, session, first, {"action": "decline"})).status_code == 200
        assert await redis.hlen(s.inputs) == 4
        assert int(await redis.hget(s.meta, "bytes") or 0) > before
        assert (await trimmed.call(session, web["id"], call_id, "result", text="done")).status_code == 204
        await trimmed.wait_for(session, run_over)
        until = asyncio.get_running_loop().time() + 10
        while await redis.hlen(s.calls) or await redis.hlen(s.inputs):
            assert asyncio.get_running_loop().time() < until, await redis.hkeys(s.inputs)
            await asyncio.sleep(0.1)
        for request_id in (first, second):
            assert (await read(trimmed, session, request_id)).status_code == 404


async def test_an_idempotency_key_replays_an_ask_and_an_answer(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    call_id = await acked_call(api, session, web["id"])
    path = f"/v1/sessions/{session.id}/clients/{web['id']}/calls/{call_id}/input-requests"
    async with api.as_session(session) as client:
        first = await client.post(path, json=ASK, headers={"Idempotency-Key": "ask-1"})
        again = await client.post(path, json=ASK, headers={"Idempotency-Key": "ask-1"})
        assert first.status_code == again.status_code == 201, again.text
        assert first.json() == again.json()
        request_id = first.json()["request_id"]
        answer_path = f"/v1/sessions/{session.id}/input-requests/{request_id}"
        body = {"action": "accept", "content": {"amount": 3, "confirm": True}}
        answered = await client.post(answer_path, json=body, headers={"Idempotency-Key": "answer-1"})
        replayed = await client.post(answer_path, json=body, headers={"Idempotency-Key": "answer-1"})
        assert answered.status_code == replayed.status_code == 200, replayed.text
        assert answered.json() == replayed.json()
        other = await client.post(answer_path, json=body, headers={"Idempotency-Key": "answer-2"})
        assert other.status_code == 409
    assert len(of_type(await extended(api, session), "input_requested")) == 1
    assert len(of_type(await extended(api, session), "input_provided")) == 1
