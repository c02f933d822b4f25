"""Where an MCP caller's input requests hold beyond one process and one transport: a `requestState`
opens in any API process sharing `SWITCHBOARD_SECRET_KEY` (and in no other); an older caller that declared
elicitation, sampling or roots is asked in band, and its reply answers in any API process."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import mcp.types as mt
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import SecretStr, ValidationError

from api.mcp.back_channel import asks_of
from api.mcp.sealing import RequestStates, Sealed, arguments_digest
from common.settings import ProcessSettings
from switchboard.settings import Settings
from tests.api.test_input_requests import ask, read
from tests.api.test_mcp_inputs import CALLED, NAME_FORM, Person, Roots, acked, caller, first_round, until_answered
from tests.api.test_session_mcp import LOOKUP, text
from tests.api_client import Api, running_api

pytestmark = pytest.mark.both_redis


def test_a_state_sealed_by_one_process_opens_in_another_with_the_same_secret_only() -> None:
    secret = SecretStr("s" * 40)
    sealed = Sealed("sess", "mcp_1", 7, CALLED, arguments_digest({"word": "w"}), ("r1", "r2"))
    token = RequestStates(secret).seal(sealed)
    assert RequestStates(secret).open(token) == sealed
    assert RequestStates(SecretStr("t" * 40)).open(token) is None
    # Unset, each process makes up its own key.
    assert RequestStates(None).open(RequestStates(None).seal(sealed)) is None


def test_a_short_secret_key_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValidationError) as refused:
        ProcessSettings(secret_key=SecretStr("short"))
    assert "secret_key" in str(refused.value)
    assert "at least 32 characters" in str(refused.value)


async def test_an_older_caller_that_declared_it_is_asked_in_band(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    person = Person(mt.ElicitResult(action="accept", content={"name": "Old"}), mt.ElicitResult(action="decline"))
    roots = Roots()
    async with caller(api, session, mode="legacy", elicitation_callback=person, list_roots_callback=roots) as client:
        assert client.protocol_version != "2026-07-28"
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "old"}))
        call_id = await acked(api, session, web["id"])
        form = await ask(api, session, web["id"], call_id, {"message": "Name?", "schema": NAME_FORM})
        assert (await until_answered(api, session, form.json()["request_id"]))["content"] == {"name": "Old"}
        page = await ask(api, session, web["id"], call_id, {"message": "Sign in", "url": "https://a.example/"})
        request_id = page.json()["request_id"]
        assert (await until_answered(api, session, request_id))["action"] == "decline"
        listed = await ask(api, session, web["id"], call_id, {"method": "roots/list"})
        assert listed.status_code == 201, listed.text
        assert (await until_answered(api, session, listed.json()["request_id"]))["content"] == roots.listed
        # Sampling was not declared: the client is told so at once (MCP's missing-capability error).
        sampled = await ask(api, session, web["id"], call_id, {"method": "sampling/createMessage", "params": {}})
        assert sampled.status_code == 409, sampled.text
        assert "Client does not support sampling" in sampled.json()["error"]["message"]
        await api.call(session, web["id"], call_id, "result", text="hello Old")
        result = await asyncio.wait_for(calling, 10)
    assert text(result) == "hello Old"
    assert isinstance(person.seen[0], mt.ElicitRequestFormParams)
    assert person.seen[0].requested_schema == NAME_FORM
    (seen_page,) = person.seen[1:]
    assert isinstance(seen_page, mt.ElicitRequestURLParams)
    # 2025-11-25 names a URL-mode elicitation: the request's id.
    assert (seen_page.url, seen_page.elicitation_id) == ("https://a.example/", request_id)


async def test_an_older_caller_that_declared_nothing_gets_no_session_and_no_requests(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with caller(api, session, mode="legacy") as client:
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "plain"}))
        call_id = await acked(api, session, web["id"])
        asked = await ask(api, session, web["id"], call_id, {"message": "Name?", "schema": NAME_FORM})
        # Not relayed: it stays open for the session's other answerers.
        assert asked.status_code == 201, asked.text
        await asyncio.sleep(0.3)
        assert (await read(api, session, asked.json()["request_id"])).json()["state"] == "open"
        await api.call(session, web["id"], call_id, "result", text="done")
        assert text(await asyncio.wait_for(calling, 10)) == "done"


CLIENT_INFO = {"name": "t", "version": "1"}


def reply_to(request_id: str, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": f"switchboard-input:{request_id}", "result": result}


async def test_an_in_band_reply_answers_in_any_api_process(settings: Settings, redis_url: str, api_key: str) -> None:
    async with (
        running_api(settings, redis_url, api_key, {}, worker=False) as first,
        running_api(settings, redis_url, api_key, {}, worker=False) as second,
    ):
        session = await first.session()
        web = await first.register(session, tools=[LOOKUP])
        seen: list[mt.ElicitRequestParams] = []

        async def elsewhere(context: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
            # The caller's reply goes to the other process, as a load balancer may send it.
            seen.append(params)
            assert isinstance(params, mt.ElicitRequestFormParams)
            reply = reply_to(asked.json()["request_id"], {"action": "accept", "content": {"name": "Far"}})
            headers = {"Authorization": f"Bearer {session.token}", "Accept": "application/json, text/event-stream"}
            async with httpx2.AsyncClient(headers=headers) as http:
                posted = await http.post(f"{second.stack.url}/v1/sessions/{session.id}/mcp", json=reply)
            assert posted.status_code == 202, posted.text
            # What the package's own client would send next is answered too, and loses to the first.
            return mt.ElicitResult(action="decline")

        async with caller(first, session, mode="legacy", elicitation_callback=elsewhere) as client:
            calling = asyncio.create_task(client.call_tool(CALLED, {"word": "far"}))
            call_id = await acked(first, session, web["id"])
            asked = await ask(first, session, web["id"], call_id, {"message": "Name?", "schema": NAME_FORM})
            answered = await until_answered(first, session, asked.json()["request_id"])
            await first.call(session, web["id"], call_id, "result", text="hello Far")
            assert text(await asyncio.wait_for(calling, 10)) == "hello Far"
    assert (answered["action"], answered["content"]) == ("accept", {"name": "Far"})
    assert len(seen) == 1


@pytest.mark.parametrize(
    "reply",
    [
        # Content the form does not allow, a result of another kind, an error, no such request.
        lambda rid: reply_to(rid, {"action": "accept", "content": {"name": 7}}),
        lambda rid: reply_to(rid, {"roots": []}),
        lambda rid: {"jsonrpc": "2.0", "id": f"switchboard-input:{rid}", "error": {"code": -1, "message": "no"}},
        lambda rid: reply_to("0" * 36, {"action": "accept", "content": {"name": "X"}}),
        lambda rid: reply_to("../../etc", {"action": "accept", "content": {"name": "X"}}),
    ],
)
async def test_a_bad_in_band_reply_leaves_the_request_open(api: Api, reply: Any) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with caller(api, session, mode="legacy") as client:
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "bad"}))
        call_id = await acked(api, session, web["id"])
        asked = await ask(api, session, web["id"], call_id, {"message": "Name?", "schema": NAME_FORM})
        request_id = asked.json()["request_id"]
        headers = {"Authorization": f"Bearer {session.token}", "Accept": "application/json, text/event-stream"}
        async with api.as_session(session) as http:
            posted = await http.post(f"/v1/sessions/{session.id}/mcp", json=reply(request_id), headers=headers)
        assert posted.status_code == 202, posted.text
        assert (await read(api, session, request_id)).json()["state"] == "open"
        await api.call(session, web["id"], call_id, "result", text="done")
        await asyncio.wait_for(calling, 10)


async def test_a_retry_verifies_in_another_api_process_sharing_the_secret(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    shared: dict[str, object] = {"secret_key": SecretStr("shared-" * 8)}
    async with (
        running_api(settings, redis_url, api_key, shared, worker=False) as first,
        running_api(settings, redis_url, api_key, shared, worker=False) as second,
        running_api(settings, redis_url, api_key, {"secret_key": SecretStr("other-" * 8)}, worker=False) as third,
    ):
        session = await first.session()
        web = await first.register(session, tools=[LOOKUP])
        async with caller(first, session, elicitation_callback=Person()) as client:
            call_id, request_id, required = await first_round(first, session, client, web)
        alice: mt.InputResponses = {"user": mt.ElicitResult(action="accept", content={"name": "Alice"})}
        assert required.request_state is not None
        async with caller(third, session) as elsewhere:
            with pytest.raises(MCPError):
                await elsewhere.session.call_tool(
                    CALLED, {"word": "w"}, input_responses=alice, request_state=required.request_state
                )
        assert (await read(first, session, request_id)).json()["state"] == "open"
        async with caller(second, session) as client:
            retrying = asyncio.create_task(
                client.session.call_tool(
                    CALLED, {"word": "w"}, input_responses=alice, request_state=required.request_state
                )
            )
            assert (await until_answered(second, session, request_id))["content"] == {"name": "Alice"}
            await first.call(session, web["id"], call_id, "result", text="hello Alice")
            done = await asyncio.wait_for(retrying, 10)
    assert isinstance(done, mt.CallToolResult)
    assert text(done) == "hello Alice"


@pytest.mark.parametrize(
    ("capabilities", "asks"),
    [
        ({}, frozenset()),
        ({"elicitation": {}}, frozenset({"elicitation.form"})),
        ({"elicitation": {"url": {}}, "roots": {}}, frozenset({"elicitation.url", "roots"})),
        ({"sampling": "not an object"}, frozenset()),
    ],
)
async def test_an_initialize_gets_a_session_id_saying_what_it_declared(
    api: Api, capabilities: dict[str, Any], asks: frozenset[str]
) -> None:
    session = await api.session()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with api.as_session(session) as http:
        answered = await http.post(f"/v1/sessions/{session.id}/mcp", json=initialize, headers=headers)
    assert answered.status_code == 200, answered.text
    assert asks_of(answered.headers.get("mcp-session-id")) == asks
    assert ("mcp-session-id" in answered.headers) == bool(asks)
