"""Calls that wait for their client: a tool declared `on_leave: "wait"` keeps its call when the registration
holding it leaves, lapses or drops the tool, and the next registration of the same name offering the tool
is dispatched it under the same call id."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from common.codec import rfc3339_ms
from tests.api.test_inbox import inbox, notices
from tests.api_client import Api, Event, Session, of_type, run_over, whole_log
from tests.helpers import HIGHLIGHT
from workers.inbox_notices import inbox_consumer

pytestmark = pytest.mark.both_redis

CALL = '/call client__web__highlight_row {"row_id": "7"}'
WAITING = {**HIGHLIGHT, "on_leave": "wait"}


async def log(api: Api, session: Session, include: str | None = "extensions") -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    extra = {"include": include} if include else {}
    return await whole_log(lambda params: api.key.get(path, params={**params, **extra}))


async def wait_for(api: Api, session: Session, done: Callable[[list[Event]], bool], timeout: float = 5) -> list[Event]:
    """As Api.wait_for, on the log with its extension events."""
    until = asyncio.get_running_loop().time() + timeout
    while True:
        events = await log(api, session)
        if done(events):
            return events
        if asyncio.get_running_loop().time() > until:
            raise AssertionError(f"timed out; log: {[e['type'] for e in events]}")
        await asyncio.sleep(0.02)


def count(kind: str, n: int) -> Callable[[list[Event]], bool]:
    return lambda events: len(of_type(events, kind)) >= n


async def leave(api: Api, session: Session, client_id: str) -> None:
    async with api.as_session(session) as client:
        answer = await client.delete(f"/v1/sessions/{session.id}/clients/{client_id}")
    assert answer.status_code == 204, answer.text


async def put_tools(api: Api, session: Session, client_id: str, tools: list[dict[str, Any]]) -> None:
    async with api.as_session(session) as client:
        answer = await client.put(f"/v1/sessions/{session.id}/clients/{client_id}/tools", json={"tools": tools})
    assert answer.status_code == 200, answer.text


async def answer(api: Api, session: Session, client_id: str, call_id: str) -> None:
    acked = await api.call(session, client_id, call_id, "ack")
    assert acked.status_code == 200, acked.text
    done = await api.call(session, client_id, call_id, "result", text="row 7 is lit")
    assert done.status_code == 204, done.text


async def first_call(api: Api, session: Session) -> Event:
    return of_type(await wait_for(api, session, count("client_tool_dispatched", 1)), "client_tool_dispatched")[0]


def check_waiting(waiting: Event, call: Event, run_id: str) -> None:
    assert waiting == waiting | {"call_id": call["call_id"], "tool": "highlight_row", "client_name": "web"}
    assert waiting["run_id"] == run_id
    assert waiting["since"] < waiting["deadline"]


@pytest.mark.parametrize("acked", [False, True], ids=["dispatched", "acked"])
async def test_a_call_waits_when_its_client_leaves_and_goes_to_the_next_of_its_name(api: Api, acked: bool) -> None:
    session = await api.session()
    old = await api.register(session, tools=[WAITING])
    sent = await api.send(session, CALL)
    call = await first_call(api, session)
    if acked:
        assert (await api.call(session, old["id"], call["call_id"], "ack")).status_code == 200
    await leave(api, session, old["id"])
    events = await wait_for(api, session, count("client_tool_waiting", 1))
    (waiting,) = of_type(events, "client_tool_waiting")
    check_waiting(waiting, call, sent["run_id"])
    assert not of_type(events, "client_tool_failed")
    assert events.index(of_type(events, "client_left")[0]) < events.index(waiting)
    # The Subako view has no such event.
    assert not of_type(await log(api, session, include=None), "client_tool_waiting")
    # Nobody holds the call while it waits: the registration that left cannot answer it.
    late = await api.call(session, old["id"], call["call_id"], "result", text="from the closed tab")
    assert late.status_code == 404

    new = await api.register(session, tools=[WAITING])
    assert new["name"] == "web"
    events = await wait_for(api, session, count("client_tool_dispatched", 2))
    again = of_type(events, "client_tool_dispatched")[1]
    assert again == again | {"client_id": new["id"], "call_id": call["call_id"], "arguments": call["arguments"]}
    await answer(api, session, new["id"], call["call_id"])
    events = await api.wait_for(session, run_over)
    assert [e["call_id"] for e in of_type(events, "tool_result")] == [call["call_id"]]
    assert of_type(events, "run_completed")
    # The old registration's result is still refused once the call is answered by the new one.
    assert (await api.call(session, old["id"], call["call_id"], "result", text="late")).status_code == 404


@pytest.mark.short_deadlines
async def test_a_lapsed_registration_leaves_its_call_waiting(api: Api) -> None:
    session = await api.session()
    # A timeout_s long enough to outlast the 5 s lease.
    old = await api.register(session, ttl=5, tools=[{**WAITING, "timeout_s": 60}])
    await api.send(session, CALL)
    call = await first_call(api, session)
    assert (await api.call(session, old["id"], call["call_id"], "ack")).status_code == 200
    # Never pinged: the lease lapses at 5 s (the tool's timeout_s, not the 1 s deadline, bounds the call).
    events = await wait_for(api, session, count("client_tool_waiting", 1), timeout=10)
    assert of_type(events, "client_left")[0]["reason"] == "timed_out"
    assert not of_type(events, "client_tool_failed")
    new = await api.register(session, ttl=60, tools=[WAITING])
    await wait_for(api, session, count("client_tool_dispatched", 2))
    await answer(api, session, new["id"], call["call_id"])
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_completed")
    assert not of_type(events, "client_tool_failed")


async def test_dropping_the_tool_parks_the_call_and_offering_it_again_takes_it(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[WAITING])
    await api.send(session, CALL)
    call = await first_call(api, session)
    await put_tools(api, session, web["id"], [])
    events = await wait_for(api, session, count("client_tool_waiting", 1))
    assert of_type(events, "client_tool_waiting")[0]["call_id"] == call["call_id"]
    # Waiting, the call is nobody's: not even the registration that dropped the tool may ack it.
    assert (await api.call(session, web["id"], call["call_id"], "ack")).status_code == 404
    await put_tools(api, session, web["id"], [WAITING])
    events = await wait_for(api, session, count("client_tool_dispatched", 2))
    again = of_type(events, "client_tool_dispatched")[1]
    assert (again["client_id"], again["call_id"]) == (web["id"], call["call_id"])
    await answer(api, session, web["id"], call["call_id"])
    assert of_type(await api.wait_for(session, run_over), "run_completed")


async def test_a_registration_renamed_for_a_taken_name_does_not_get_the_call(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[WAITING])
    await api.send(session, CALL)
    call = await first_call(api, session)
    # `web` keeps its name but drops the tool: the call waits for a `web` offering it.
    await put_tools(api, session, web["id"], [])
    await wait_for(api, session, count("client_tool_waiting", 1))
    other = await api.register(session, tools=[WAITING])
    assert other["name"] == "web-2"
    await asyncio.sleep(0.3)
    events = await log(api, session)
    assert len(of_type(events, "client_tool_dispatched")) == 1
    assert (await api.call(session, other["id"], call["call_id"], "ack")).status_code == 404
    # The holder of the name offering it again does.
    await put_tools(api, session, web["id"], [WAITING])
    events = await wait_for(api, session, count("client_tool_dispatched", 2))
    assert of_type(events, "client_tool_dispatched")[1]["client_id"] == web["id"]


@pytest.mark.short_deadlines
async def test_a_call_no_client_takes_in_time_fails_with_client_gone(api: Api) -> None:
    session = await api.session()
    old = await api.register(session, tools=[WAITING])
    await api.send(session, CALL)
    call = await first_call(api, session)
    await leave(api, session, old["id"])
    events = await wait_for(api, session, run_over)
    waiting = of_type(events, "client_tool_waiting")[0]
    failure = of_type(events, "client_tool_failed")[0]
    assert failure == failure | {"client_id": old["id"], "call_id": call["call_id"], "reason": "client_gone"}
    assert events.index(waiting) < events.index(failure)
    result = events[events.index(failure) + 1]
    assert result["type"] == "tool_result"
    assert result["is_error"] is True
    text = result["content"][0]["data"]["text"]
    assert text.startswith("no client named web offering highlight_row came back within 1 s")
    # A registration that comes after the deadline is handed nothing.
    late = await api.register(session, tools=[WAITING])
    await asyncio.sleep(0.2)
    assert len(of_type(await log(api, session), "client_tool_dispatched")) == 1
    assert (await api.call(session, late["id"], call["call_id"], "ack")).status_code == 404


async def test_a_tool_without_on_leave_fails_at_once_as_before(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[{**HIGHLIGHT, "on_leave": "fail"}])
    await api.send(session, CALL)
    call = await first_call(api, session)
    await leave(api, session, web["id"])
    events = await wait_for(api, session, run_over)
    assert not of_type(events, "client_tool_waiting")
    assert of_type(events, "client_tool_failed")[0] == of_type(events, "client_tool_failed")[0] | {
        "call_id": call["call_id"],
        "reason": "client_gone",
    }
    # Written only when declared: the default tool descriptor is Subako's, byte for byte.
    registered = of_type(events, "client_registered")[0]
    assert registered["tools"][0]["on_leave"] == "fail"
    plain = await api.session()
    await api.register(plain)
    assert "on_leave" not in of_type(await api.events(plain), "client_registered")[0]["tools"][0]


async def test_a_run_scoped_tool_may_declare_on_leave(api: Api) -> None:
    session = await api.session()
    sent = await api.send(session, "/call highlight_row", client_tools=[WAITING])
    events = await wait_for(api, session, count("client_tool_dispatched", 1))
    assert of_type(events, "client_registered")[0]["tools"][0]["on_leave"] == "wait"
    call = of_type(events, "client_tool_dispatched")[0]
    await answer(api, session, sent["client_id"], call["call_id"])
    assert of_type(await api.wait_for(session, run_over), "run_completed")


@pytest.mark.parametrize("value", ["later", "", None, 1, True])
async def test_a_bad_on_leave_is_refused_naming_the_field(api: Api, value: object) -> None:
    session = await api.session()
    tool = {**HIGHLIGHT, "on_leave": value}
    web = await api.register(session)
    lifetime = {"type": "never"}
    async with api.as_session(session) as client:
        answers = [
            await client.post(
                f"/v1/sessions/{session.id}/clients", json={"name": "x", "lifetime": lifetime, "tools": [tool]}
            ),
            await client.put(f"/v1/sessions/{session.id}/clients/{web['id']}/tools", json={"tools": [tool]}),
            await client.post(
                f"/v1/sessions/{session.id}/events", json={"type": "input", "text": "hi", "client_tools": [tool]}
            ),
        ]
    for refused in answers:
        if value is None:
            # null is as good as absent.
            assert refused.status_code in (200, 201), refused.text
            continue
        assert refused.status_code == 400, refused.text
        assert "on_leave" in refused.json()["error"]["message"]
    if value is not None:
        # Nothing half written: the registration's tools are as they were, no other client came.
        events = await api.events(session)
        assert len(of_type(events, "client_registered")) == 1
        assert not of_type(events, "client_tools_updated")
        assert not of_type(events, "message_user")


async def test_a_waiting_call_is_in_the_inbox_until_a_client_takes_it(api: Api) -> None:
    consume = inbox_consumer(api.stack.broker.inbox)
    session = await api.session()
    old = await api.register(session, tools=[WAITING])
    sent = await api.send(session, CALL)
    call = await first_call(api, session)
    await leave(api, session, old["id"])
    events = await wait_for(api, session, count("client_tool_waiting", 1))
    waiting = of_type(events, "client_tool_waiting")[0]
    for notice in notices(session, events, None):
        await consume(notice)
    (item,) = [i for i in await inbox(api, kind="call") if i["session_id"] == session.id]
    assert item == item | {"run_id": sent["run_id"], "call_id": call["call_id"], "client_name": "web"}
    assert rfc3339_ms(item["since"]) == rfc3339_ms(waiting["since"])
    assert rfc3339_ms(item["deadline"]) == rfc3339_ms(waiting["deadline"])
    new = await api.register(session, tools=[WAITING])
    events = await wait_for(api, session, count("client_tool_dispatched", 2))
    for notice in notices(session, events, None):
        await consume(notice)
    assert not [i for i in await inbox(api, kind="call") if i["session_id"] == session.id]
    await answer(api, session, new["id"], call["call_id"])
