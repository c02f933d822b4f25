"""Each session as an MCP server: the `mcp` package's client drives /v1/sessions/{sid}/mcp while a
registered HTTP client answers the calls it dispatches."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from switchboard.settings import Settings
from tests.api_client import Api, Event, Session, of_type
from tests.helpers import HIGHLIGHT

LOOKUP = {
    "name": "lookup",
    "description": "Look a word up",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    "annotations": {"readOnlyHint": True},
}


@contextlib.asynccontextmanager
async def mcp_client(api: Api, session: Session, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token or session.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"{api.stack.url}/v1/sessions/{session.id}/mcp", http_client=http)
        async with Client(transport, cache=None) as client:
            yield client


async def dispatched(api: Api, session: Session, count: int = 1) -> list[Event]:
    events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) >= count, timeout=10)
    return of_type(events, "client_tool_dispatched")


def text(result: mt.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, mt.TextContent)
    return first.text


async def test_tools_list_gives_the_active_client_tools_by_model_visible_name(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[HIGHLIGHT, LOOKUP])
    await api.register(session, name="other", tools=[])
    async with mcp_client(api, session) as client:
        listed = (await client.list_tools(cache_mode="refresh")).tools
    assert [t.name for t in listed] == ["client__web__highlight_row", "client__web__lookup"]
    lookup = listed[1]
    assert lookup.description == "Look a word up"
    assert lookup.input_schema == LOOKUP["parameters"]
    assert lookup.annotations is not None
    assert lookup.annotations.read_only_hint is True


async def test_a_call_goes_to_the_registration_and_its_answer_comes_back(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool("client__web__lookup", {"word": "switch"}))
        (event,) = await dispatched(api, session)
        assert (event["from"], event["tool"], event["arguments"]) == ("mcp", "lookup", {"word": "switch"})
        assert (await api.call(session, web["id"], event["call_id"], "ack")).status_code == 200
        answered = await api.call(session, web["id"], event["call_id"], "result", text="a device that connects")
        assert answered.status_code == 204
        result = await asyncio.wait_for(calling, 10)
    assert result.is_error is False
    assert text(result) == "a device that connects"
    events = await api.events(session)
    assert not of_type(events, "run_queued")
    (logged,) = of_type(events, "tool_result")
    assert logged["call_id"] == event["call_id"]


async def test_an_image_result_comes_back_as_an_image(api: Api) -> None:
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool("client__web__lookup", {"word": "pixel"}))
        (event,) = await dispatched(api, session)
        await api.call(session, web["id"], event["call_id"], "ack")
        content = [{"type": "text", "text": "here"}, {"type": "image", "media_type": "image/png", "data": pixel}]
        assert (await api.call(session, web["id"], event["call_id"], "result", content=content)).status_code == 204
        result = await asyncio.wait_for(calling, 10)
    image = result.content[1]
    assert isinstance(image, mt.ImageContent)
    assert (image.mime_type, image.data) == ("image/png", pixel)


async def test_arguments_are_checked_before_the_call_is_sent(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    async with mcp_client(api, session) as client:
        result = await client.call_tool("client__web__lookup", {"word": 7})
        unknown = await client.call_tool("client__nobody__lookup", {})
        malformed = await client.call_tool("lookup", {})
    assert result.is_error is True
    assert "do not match its schema" in text(result)
    assert "no active client nobody" in text(unknown)
    assert "client__<client name>__<tool>" in text(malformed)
    assert not of_type(await api.events(session), "client_tool_dispatched")


async def test_progress_becomes_mcp_progress(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    seen: list[tuple[float, float | None, str | None]] = []

    class Progress:
        async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

    progress = Progress()

    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(
            client.call_tool("client__web__lookup", {"word": "slow"}, progress_callback=progress)
        )
        (event,) = await dispatched(api, session)
        await api.call(session, web["id"], event["call_id"], "ack")
        sent = await api.call(session, web["id"], event["call_id"], "progress", message="half", fraction=0.5)
        assert sent.status_code == 200
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.05)
        await api.call(session, web["id"], event["call_id"], "result", text="done")
        await asyncio.wait_for(calling, 10)
    assert seen == [(0.5, 1.0, "half")]


@pytest.mark.short_deadlines
async def test_the_failure_reason_leads_an_error_result(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    async with mcp_client(api, session) as client:
        result = await asyncio.wait_for(client.call_tool("client__web__lookup", {"word": "late"}), 15)
    assert result.is_error is True
    assert text(result).startswith("ack_timeout: the client did not acknowledge the call within 0.5 s")


async def test_a_client_that_leaves_fails_the_call_with_client_gone(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool("client__web__lookup", {"word": "bye"}))
        await dispatched(api, session)
        async with api.as_session(session) as http:
            assert (await http.delete(f"/v1/sessions/{session.id}/clients/{web['id']}")).status_code == 204
        result = await asyncio.wait_for(calling, 10)
    assert result.is_error is True
    assert text(result).startswith("client_gone: ")


async def test_an_abandoned_call_is_cancelled(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool("client__web__lookup", {"word": "never"}))
        (event,) = await dispatched(api, session)
        calling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await calling
        events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_failed")), timeout=10)
    (failed,) = of_type(events, "client_tool_failed")
    assert (failed["call_id"], failed["reason"], failed.get("detail")) == (event["call_id"], "run_gone", "cancelled")


async def test_who_may_connect(api: Api, settings: Settings, redis_url: str, api_key: str) -> None:
    session = await api.session()
    other = await api.session()
    await api.register(session, tools=[LOOKUP])
    url = f"{api.stack.url}/v1/sessions/{session.id}/mcp"
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient(timeout=10) as http:
        for token, status in (("", 401), ("swb_st_nonsense", 401), (other.token, 404)):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            answer = await http.post(url, json=body, headers=headers)
            assert answer.status_code == status, (token, answer.text)
    minted = await api.key.post("/v1/api-keys", json={"label": "reader", "permissions": ["session.read"]})
    reader = minted.json()["secret"]
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.post(url, json=body, headers={"Authorization": f"Bearer {reader}"})
    assert answer.status_code == 403
    async with mcp_client(api, session, token=api_key) as client:
        assert len((await client.list_tools(cache_mode="refresh")).tools) == 1


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"not json", 400),
        (b'{"jsonrpc": "2.0", "id": 1}', 400),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 7}}', 200),
        (b"[" * 5000, 400),
    ],
)
async def test_malformed_requests_are_refused_and_nothing_is_dispatched(api: Api, body: bytes, status: int) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    headers = {
        "Authorization": f"Bearer {session.token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.post(f"{api.stack.url}/v1/sessions/{session.id}/mcp", content=body, headers=headers)
    assert answer.status_code == status, answer.text
    if status == 200:
        assert "error" in answer.text
    assert not of_type(await api.events(session), "client_tool_dispatched")


async def test_a_body_past_the_limit_is_refused(api: Api) -> None:
    session = await api.session()
    headers = {"Authorization": f"Bearer {session.token}", "Content-Type": "application/json"}
    big = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "' + b"x" * 2_000_000 + b'"}}'
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.post(f"{api.stack.url}/v1/sessions/{session.id}/mcp", content=big, headers=headers)
    assert answer.status_code == 413, answer.text


async def test_a_call_waiting_for_approval_is_resolved_as_denied_when_its_caller_goes_away(api: Api) -> None:
    session = await api.session(client_tool_policies={"client__web__lookup": "require_approval"})
    await api.register(session, tools=[LOOKUP])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool("client__web__lookup", {"word": "later"}))
        events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")), timeout=10)
        (request,) = of_type(events, "approval_requested")
        calling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await calling
        events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_resolved")), timeout=10)
    (resolved,) = of_type(events, "approval_resolved")
    assert resolved == resolved | {"call_id": request["call_id"], "decision": "deny", "resolved_by": None}
    (result,) = of_type(events, "tool_result")
    assert (result["call_id"], result["is_error"]) == (request["call_id"], True)
    assert not of_type(events, "client_tool_dispatched")
    # The approver who comes late finds it decided.
    async with api.as_session(session) as http:
        late = await http.post(f"/v1/sessions/{session.id}/approvals/{request['call_id']}", json={"decision": "allow"})
    assert late.status_code == 409


async def test_a_destructive_tool_no_policy_names_waits_for_approval(api: Api) -> None:
    erase = {"name": "erase", "parameters": {"type": "object"}, "annotations": {"destructiveHint": True}}
    session = await api.session()
    web = await api.register(session, tools=[erase])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool("client__web__erase", {}))
        events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")), timeout=10)
        assert not of_type(events, "client_tool_dispatched")
        (request,) = of_type(events, "approval_requested")
        async with api.as_session(session) as http:
            path = f"/v1/sessions/{session.id}/approvals/{request['call_id']}"
            assert (await http.post(path, json={"decision": "allow"})).status_code == 200
        (event,) = await dispatched(api, session)
        await api.call(session, web["id"], event["call_id"], "ack")
        await api.call(session, web["id"], event["call_id"], "result", text="erased")
        result = await asyncio.wait_for(calling, 10)
    assert (result.is_error, text(result)) == (False, "erased")


async def test_a_run_scoped_tool_takes_the_policy_of_its_own_name(api: Api) -> None:
    session = await api.session(client_tool_policies={"lookup": "deny"})
    await api.register(session, tools=[HIGHLIGHT])
    # The run waits on the registered client's call, so the turn's own registration stays active.
    await api.send(session, "/call client__web__highlight_row", client_tools=[LOOKUP])
    await dispatched(api, session)
    async with mcp_client(api, session) as client:
        names = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
        assert "lookup" in names
        result = await asyncio.wait_for(client.call_tool("lookup", {"word": "x"}), 10)
    assert result.is_error is True
    assert text(result) == "the agent's policy denies lookup, so it was not called"
    assert len(of_type(await api.events(session), "client_tool_dispatched")) == 1


async def test_a_run_scoped_tool_is_listed_and_called_by_its_own_name_as_the_model_sees_it(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[HIGHLIGHT])
    # The run waits on the registered client's call, so the turn's own registration stays active.
    await api.send(session, "/call client__web__highlight_row", client_tools=[LOOKUP])
    await dispatched(api, session)
    async with mcp_client(api, session) as client:
        names = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
        assert sorted(names) == ["client__web__highlight_row", "lookup"]
        calling = asyncio.create_task(client.call_tool("lookup", {"word": "x"}))
        event = (await dispatched(api, session, 2))[1]
        assert (event["from"], event["tool"]) == ("mcp", "lookup")
        answered = await api.call(session, event["client_id"], event["call_id"], "result", text="found")
        assert answered.status_code == 204, answered.text
        result = await asyncio.wait_for(calling, 10)
    assert (result.is_error, text(result)) == (False, "found")


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_only_post_is_served_and_the_rest_are_405_holding_nothing(api: Api, method: str) -> None:
    session = await api.session()
    headers = {"Authorization": f"Bearer {session.token}", "Accept": "text/event-stream"}
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.request(method, f"{api.stack.url}/v1/sessions/{session.id}/mcp", headers=headers)
    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"
    assert answer.json()["error"]["code"] == "method_not_allowed"
