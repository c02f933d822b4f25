"""The red team's findings on the session MCP endpoint and the bridge, reproduced with only a session
token: an agent's policies skipped through `/v1/sessions/{sid}/mcp` (a deny, a pattern deny, a tool that
needs approval, a remembered decision), MCP GET streams that no cap counted, and `switchboard tools mcp`
forwarding a tool it never declared once the token had added it to the registration."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from common.events.build import args_hash
from switchboard.settings import Settings
from tests.api.test_approvals import decide
from tests.api.test_session_mcp import dispatched, mcp_client, text
from tests.api_client import Api, Session, of_type, running_api
from tests.e2e.served import api_and_worker
from tests.e2e.test_tool_mcp import bridge
from tests.mcp_servers import Seen, in_thread, serving_odd

DANGER = {"name": "danger", "description": "Does something the agent forbids", "parameters": {"type": "object"}}
ASK = {
    "name": "ask",
    "description": "Does something the agent wants a person to approve first",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
}
# The red team's agent version: one tool denied, one that waits for approval.
POLICIES = {"client__web__danger": "deny", "client__web__ask": "require_approval"}
DENIED = "the agent's policy denies client__web__danger"
# How long a call the policies stop may take to be answered: it is answered at once, never dispatched.
PROMPT_S = 5.0


async def answered(api: Api, session: Session, client_id: str, call_id: str, reply: str) -> None:
    assert (await api.call(session, client_id, call_id, "ack")).status_code == 200
    assert (await api.call(session, client_id, call_id, "result", text=reply)).status_code == 204


async def approval_asked(api: Api, session: Session, count: int = 1) -> dict[str, Any]:
    events = await api.wait_for(session, lambda es: len(of_type(es, "approval_requested")) >= count, timeout=10)
    request: dict[str, Any] = of_type(events, "approval_requested")[count - 1]
    return request


@pytest.mark.both_redis
async def test_a_denied_tool_is_an_error_result_and_never_dispatched(api: Api) -> None:
    session = await api.session(client_tool_policies=POLICIES)
    await api.register(session, tools=[DANGER, ASK])
    async with mcp_client(api, session) as client:
        result = await asyncio.wait_for(client.call_tool("client__web__danger", {}), PROMPT_S)
    assert result.is_error is True
    assert DENIED in text(result)
    events = await api.events(session)
    assert not of_type(events, "client_tool_dispatched")
    assert not of_type(events, "approval_requested")


@pytest.mark.both_redis
async def test_the_mcp_deny_says_what_a_models_denied_call_says(api: Api) -> None:
    session = await api.session(client_tool_policies=POLICIES)
    await api.register(session, tools=[DANGER, ASK])
    await api.send(session, "/call client__web__danger")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "tool_result")), timeout=10)
    model_text = of_type(events, "tool_result")[0]["content"][0]["data"]["text"]
    async with mcp_client(api, session) as client:
        result = await asyncio.wait_for(client.call_tool("client__web__danger", {}), PROMPT_S)
    assert text(result) == model_text
    assert DENIED in model_text


@pytest.mark.both_redis
async def test_the_docs_pattern_deny_holds_for_a_client_the_token_names_admin(api: Api) -> None:
    session = await api.session(client_tool_policies={"client__admin__*": "deny"})
    await api.register(session, name="admin", tools=[{"name": "drop_tables", "parameters": {"type": "object"}}])
    async with mcp_client(api, session) as client:
        result = await asyncio.wait_for(client.call_tool("client__admin__drop_tables", {}), PROMPT_S)
    assert result.is_error is True
    assert "the agent's policy denies client__admin__drop_tables" in text(result)
    assert not of_type(await api.events(session), "client_tool_dispatched")


@pytest.mark.both_redis
async def test_a_tool_that_needs_approval_waits_then_runs_with_the_approvers_arguments(api: Api) -> None:
    session = await api.session(client_tool_policies=POLICIES)
    web = await api.register(session, tools=[DANGER, ASK])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool("client__web__ask", {"n": 1}))
        request = await approval_asked(api, session)
        expected = {"server": "client:web", "tool": "ask", "arguments": {"n": 1}, "args_hash": args_hash({"n": 1})}
        assert request == request | expected | {"from": "mcp"}
        # Nothing reaches the client while the approval waits, and the MCP caller still waits.
        await asyncio.sleep(0.3)
        assert not of_type(await api.events(session), "client_tool_dispatched")
        assert not calling.done()
        decided = await decide(api, session, request["call_id"], {"decision": "allow", "arguments": {"n": 2}})
        assert decided.status_code == 200, decided.text
        (event,) = await dispatched(api, session)
        assert (event["call_id"], event["arguments"], event["from"]) == (request["call_id"], {"n": 2}, "mcp")
        await answered(api, session, web["id"], event["call_id"], "asked")
        result = await asyncio.wait_for(calling, 10)
    assert result.is_error is False
    assert text(result) == "asked"


@pytest.mark.both_redis
async def test_a_tool_that_needs_approval_and_is_denied_is_never_dispatched(api: Api) -> None:
    session = await api.session(client_tool_policies=POLICIES)
    await api.register(session, tools=[DANGER, ASK])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool("client__web__ask", {"n": 1}))
        request = await approval_asked(api, session)
        decided = await decide(api, session, request["call_id"], {"decision": "deny", "message": "not today"})
        assert decided.status_code == 200, decided.text
        result = await asyncio.wait_for(calling, 10)
    assert result.is_error is True
    assert text(result) == "the user denied this call: not today"
    assert not of_type(await api.events(session), "client_tool_dispatched")


@pytest.mark.both_redis
@pytest.mark.parametrize("decision", ["allow", "deny"])
async def test_a_remembered_decision_decides_a_later_mcp_call(api: Api, decision: str) -> None:
    session = await api.session(client_tool_policies=POLICIES)
    web = await api.register(session, tools=[DANGER, ASK])
    async with mcp_client(api, session) as client:
        first = asyncio.create_task(client.call_tool("client__web__ask", {"n": 1}))
        request = await approval_asked(api, session)
        body = {"decision": decision, "remember": "session"} | ({"message": "never"} if decision == "deny" else {})
        assert (await decide(api, session, request["call_id"], body)).status_code == 200
        if decision == "allow":
            (event,) = await dispatched(api, session)
            await answered(api, session, web["id"], event["call_id"], "first")
        await asyncio.wait_for(first, 10)
        second = asyncio.create_task(client.call_tool("client__web__ask", {"n": 2}))
        if decision == "allow":
            (_, event) = await dispatched(api, session, 2)
            await answered(api, session, web["id"], event["call_id"], "second")
        result = await asyncio.wait_for(second, 10)
    events = await api.events(session)
    # One approval asked for, the first call's: the second was decided by the remembered decision.
    assert len(of_type(events, "approval_requested")) == 1
    remembered = of_type(events, "approval_resolved")[1]
    assert (remembered["decision"], remembered["remembered"]) == (decision, True)
    if decision == "allow":
        assert (result.is_error, text(result)) == (False, "second")
    else:
        assert (result.is_error, text(result)) == (True, "the user denied this call: never")
        assert not of_type(events, "client_tool_dispatched")


MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def mcp_call(name: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@contextlib.asynccontextmanager
async def held(http: httpx.AsyncClient, session: Session) -> AsyncIterator[httpx.Response]:
    """A tools/call its client never acks, held open (its answer's head read) until the block ends."""
    body = mcp_call("client__web__lookup", {"word": "hold"})
    async with http.stream("POST", f"/v1/sessions/{session.id}/mcp", json=body, headers=MCP_HEADERS) as answer:
        yield answer


LOOKUP = {"name": "lookup", "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}


async def test_mcp_get_streams_hold_nothing_and_calls_past_the_caps_are_429(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    update: dict[str, object] = {"max_streams_per_session": 2, "max_streams_per_credential": 3}
    async with running_api(settings, redis_url, api_key, update) as api:
        first, second, third = [await api.session() for _ in range(3)]
        for session in (first, second, third):
            await api.register(session, tools=[LOOKUP])
        path = f"/v1/sessions/{first.id}/mcp"
        async with api.as_session(first) as tab, contextlib.AsyncExitStack() as streams:
            # Past both caps, all at once, as the red team's 1,500 were: each is answered and closed.
            gets = [
                await streams.enter_async_context(tab.stream("GET", path, headers={"Accept": "text/event-stream"}))
                for _ in range(8)
            ]
            for got in gets:
                assert got.status_code == 405
                assert got.headers["allow"] == "POST"
                body = await asyncio.wait_for(got.aread(), 5)
                assert httpx.Response(405, content=body).json()["error"]["code"] == "method_not_allowed"
        async with api.as_session(first) as tab, contextlib.AsyncExitStack() as calls:
            for _ in range(2):
                assert (await calls.enter_async_context(held(tab, first))).status_code == 200
            async with held(tab, first) as refused:
                assert refused.status_code == 429
                assert refused.headers["retry-after"] == "5"
                assert "SWITCHBOARD_MAX_STREAMS_PER_SESSION" in (await refused.aread()).decode()
            # The API key is another credential, with a cap of its own across sessions.
            for session in (second, third, second):
                assert (await calls.enter_async_context(held(api.key, session))).status_code == 200
            async with held(api.key, third) as refused:
                assert refused.status_code == 429
                assert refused.headers["retry-after"] == "5"
                assert "SWITCHBOARD_MAX_STREAMS_PER_CREDENTIAL" in (await refused.aread()).decode()
        # All closed: room again.
        async with api.as_session(first) as tab, held(tab, first) as again:
            assert again.status_code == 200


def odd_over_http(seen: Seen) -> contextlib.AbstractContextManager[str]:
    """tests/mcp_servers.py's odd server (one tool a registration cannot carry) over Streamable HTTP, in a
    thread with a loop of its own; its endpoint URL."""
    return in_thread(lambda: serving_odd(seen))


async def call_over_mcp(url: str, sid: str, token: str, name: str) -> mt.CallToolResult:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        transport = streamable_http_client(f"{url}/v1/sessions/{sid}/mcp", http_client=http)
        async with Client(transport, cache=None) as client:
            return await asyncio.wait_for(client.call_tool(name, {}), 20)


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_the_bridge_never_forwards_a_tool_it_did_not_declare(redis_url: str, tmp_path: Path) -> None:
    seen = Seen()
    settings = {"ack_timeout_s": "20", "result_timeout_s": "30"}
    with (
        odd_over_http(seen) as server,
        api_and_worker(redis_url, tmp_path / "logs", **settings) as served,
        bridge(served, tmp_path / "bridge", "--server-url", server, server=()) as running,
    ):
        [client] = running.clients()
        declared = [tool["name"] for tool in client["tools"]]
        # The bridge left out the tool whose schema refers to a URL.
        assert "fetches" not in declared
        assert "plain" in declared
        # The session token puts it into the registration itself (with a schema a registration takes).
        tools = [*client["tools"], {"name": "fetches", "parameters": {"type": "object"}}]
        with running.http() as http:
            replaced = http.put(f"/v1/sessions/{running.sid}/clients/{client['id']}/tools", json={"tools": tools})
        assert replaced.status_code == 200, replaced.text
        refused = asyncio.run(call_over_mcp(running.url, running.sid, running.token, "client__mcp__fetches"))
        served_call = asyncio.run(call_over_mcp(running.url, running.sid, running.token, "client__mcp__plain"))
    assert refused.is_error is True
    assert "fetches" in text(refused)
    assert "declare" in text(refused)
    assert (served_call.is_error, text(served_call)) == (False, "plain")
    # The local server saw the declared tool's call, and never the other.
    assert seen.began == ["plain"]
