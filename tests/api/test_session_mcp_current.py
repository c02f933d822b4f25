"""The session MCP server as it is now: every revision the `mcp` package speaks (2026-07-28's stateless
requests, their header validation and caching hints included), `/mcp/{client_name}` serving one client's
tools under their own names, and the agent's allowed origins held on both endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from broker.services.runs import OfferedClient, Runs
from switchboard.settings import Settings
from tests.api.test_session_mcp import LOOKUP, dispatched, text
from tests.api_client import Api, Session, of_type, running_api
from tests.helpers import HIGHLIGHT

MODERN = MODERN_PROTOCOL_VERSIONS[-1]
# The revisions a test runs each endpoint at: the handshake's newest (the initialize handshake) and 2026-07-28.
MODES = ["legacy", MODERN]
REGION = {
    "name": "forecast",
    "parameters": {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        "required": ["region"],
    },
}


def endpoint(api: Api, session: Session, client_name: str | None) -> str:
    base = f"{api.stack.url}/v1/sessions/{session.id}/mcp"
    return base if client_name is None else f"{base}/{client_name}"


@contextlib.asynccontextmanager
async def connected(
    api: Api, session: Session, client_name: str | None = None, mode: str = MODERN
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {session.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(endpoint(api, session, client_name), http_client=http)
        async with Client(transport, cache=None, mode=mode) as client:
            yield client


def modern_body(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}}


def modern_headers(session: Session, method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {session.token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        **extra,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def answer_of(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, whether it came as JSON or as an event stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        found: dict[str, Any] = json.loads(data[-1])
        return found
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.both_redis
@pytest.mark.parametrize("mode", MODES)
async def test_a_client_endpoint_lists_and_calls_that_clients_tools_by_their_own_names(api: Api, mode: str) -> None:
    session = await api.session()
    web = await api.register(session, tools=[HIGHLIGHT, LOOKUP])
    await api.register(session, name="other", tools=[{"name": "elsewhere", "parameters": {"type": "object"}}])
    async with connected(api, session, "web", mode) as client:
        assert client.protocol_version == (MODERN if mode == MODERN else HANDSHAKE_PROTOCOL_VERSIONS[-1])
        listed = (await client.list_tools(cache_mode="refresh")).tools
        assert [tool.name for tool in listed] == ["highlight_row", "lookup"]
        assert listed[1].input_schema == LOOKUP["parameters"]
        calling = asyncio.create_task(client.call_tool("lookup", {"word": "switch"}))
        (event,) = await dispatched(api, session)
        assert (event["from"], event["client_id"], event["tool"]) == ("mcp", web["id"], "lookup")
        await api.call(session, web["id"], event["call_id"], "ack")
        await api.call(session, web["id"], event["call_id"], "result", text="a device")
        result = await asyncio.wait_for(calling, 10)
    assert (result.is_error, text(result)) == (False, "a device")
    # The model-visible names stay on /mcp, at every revision.
    async with connected(api, session, None, mode) as client:
        names = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
    assert names == ["client__web__highlight_row", "client__web__lookup", "client__other__elsewhere"]


async def test_a_client_endpoint_serves_whichever_registration_holds_the_name_now(api: Api) -> None:
    session = await api.session()
    first = await api.register(session, tools=[LOOKUP])
    async with api.as_session(session) as http:
        assert (await http.delete(f"/v1/sessions/{session.id}/clients/{first['id']}")).status_code == 204
    async with connected(api, session, "web") as client:
        assert (await client.list_tools(cache_mode="refresh")).tools == []
        second = await api.register(session, tools=[HIGHLIGHT])
        assert [t.name for t in (await client.list_tools(cache_mode="refresh")).tools] == ["highlight_row"]
        gone = await client.call_tool("lookup", {"word": "x"})
        calling = asyncio.create_task(client.call_tool("highlight_row", {"row": 1}))
        (event,) = await dispatched(api, session)
        assert event["client_id"] == second["id"]
        await api.call(session, second["id"], event["call_id"], "result", text="lit")
        assert text(await asyncio.wait_for(calling, 10)) == "lit"
    assert gone.is_error is True
    assert text(gone) == "no active client web serves a tool named lookup in this session"


@pytest.mark.parametrize("mode", MODES)
async def test_an_unknown_client_lists_nothing_and_its_calls_are_tool_errors_naming_it(api: Api, mode: str) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    async with connected(api, session, "nobody", mode) as client:
        assert (await client.list_tools(cache_mode="refresh")).tools == []
        result = await client.call_tool("lookup", {"word": "x"})
        # A model-visible name is no way round: on a client's endpoint every name is that client's own.
        sideways = await client.call_tool("client__web__lookup", {"word": "x"})
    assert result.is_error is True
    assert text(result) == "no active client nobody serves a tool named lookup in this session"
    assert text(sideways) == "no active client nobody serves a tool named client__web__lookup in this session"
    assert not of_type(await api.events(session), "client_tool_dispatched")


async def test_a_run_scoped_tool_is_not_served_on_a_client_endpoint(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[HIGHLIGHT])
    await api.send(session, "/call client__web__highlight_row", client_tools=[LOOKUP])
    await dispatched(api, session)
    async with connected(api, session, "web") as client:
        assert [t.name for t in (await client.list_tools(cache_mode="refresh")).tools] == ["highlight_row"]
        result = await client.call_tool("lookup", {"word": "x"})
    assert text(result) == "no active client web serves a tool named lookup in this session"


async def test_a_client_endpoint_applies_the_policy_of_the_model_visible_name(api: Api) -> None:
    session = await api.session(client_tool_policies={"client__web__lookup": "deny"})
    await api.register(session, tools=[LOOKUP])
    async with connected(api, session, "web") as client:
        result = await client.call_tool("lookup", {"word": "x"})
    assert result.is_error is True
    assert text(result) == "the agent's policy denies client__web__lookup, so it was not called"
    assert not of_type(await api.events(session), "client_tool_dispatched")


@pytest.mark.parametrize(
    ("name", "why"),
    [("w" * 33, "at most 32 characters"), ("Web", "pattern"), ("we_b", "pattern"), ("w.b", "pattern")],
)
async def test_a_bad_client_name_is_400_naming_the_field(api: Api, name: str, why: str) -> None:
    session = await api.session()
    body = modern_body("tools/list")
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.post(endpoint(api, session, name), json=body, headers=modern_headers(session, "tools/list"))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert "client_name" in error["message"]
    assert why in error["message"]


@pytest.mark.parametrize("client_name", [None, "web"])
async def test_every_handshake_revision_is_served(api: Api, client_name: str | None) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    url = endpoint(api, session, client_name)
    base = {"Authorization": f"Bearer {session.token}", "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=10) as http:
        for version in HANDSHAKE_PROTOCOL_VERSIONS:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
            answered = answer_of(await http.post(url, json=init, headers=base))
            assert answered["result"]["protocolVersion"] == version
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
            headers = {**base, "MCP-Protocol-Version": version}
            listed = answer_of(await http.post(url, json=listing, headers=headers))
            names = [tool["name"] for tool in listed["result"]["tools"]]
            assert names == (["lookup"] if client_name else ["client__web__lookup"]), version


@pytest.mark.parametrize("client_name", [None, "web"])
async def test_a_modern_tools_list_carries_private_caching_hints(api: Api, client_name: str | None) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.post(
            endpoint(api, session, client_name),
            json=modern_body("tools/list"),
            headers=modern_headers(session, "tools/list"),
        )
    result = answer_of(answer)["result"]
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


@pytest.mark.parametrize("client_name", [None, "web"])
@pytest.mark.parametrize(
    "case", ["method mismatch", "name mismatch", "name missing", "param mismatch", "param missing", "version unknown"]
)
async def test_modern_requests_whose_headers_do_not_match_the_body_are_400(
    api: Api, client_name: str | None, case: str
) -> None:
    session = await api.session()
    await api.register(session, tools=[REGION])
    tool = "forecast" if client_name else "client__web__forecast"
    body = modern_body("tools/call", {"name": tool, "arguments": {"region": "north"}})
    headers = modern_headers(session, "tools/call", tool, **{"Mcp-Param-Region": "north"})
    if case == "method mismatch":
        headers["Mcp-Method"] = "tools/list"
    elif case == "name mismatch":
        headers["Mcp-Name"] = "other"
    elif case == "name missing":
        del headers["Mcp-Name"]
    elif case == "param mismatch":
        headers["Mcp-Param-Region"] = "south"
    elif case == "param missing":
        del headers["Mcp-Param-Region"]
    else:
        headers["MCP-Protocol-Version"] = "2099-01-01"
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.post(endpoint(api, session, client_name), json=body, headers=headers)
    assert answer.status_code == 400, answer.text
    assert "error" in answer.json()
    assert not of_type(await api.events(session), "client_tool_dispatched")


@pytest.mark.parametrize("client_name", [None, "web"])
async def test_a_modern_call_whose_headers_match_is_dispatched(api: Api, client_name: str | None) -> None:
    session = await api.session()
    web = await api.register(session, tools=[REGION])
    tool = "forecast" if client_name else "client__web__forecast"
    body = modern_body("tools/call", {"name": tool, "arguments": {"region": "north"}})
    headers = modern_headers(session, "tools/call", tool, **{"Mcp-Param-Region": "north"})
    async with httpx2.AsyncClient(timeout=10) as http:
        calling = asyncio.create_task(http.post(endpoint(api, session, client_name), json=body, headers=headers))
        (event,) = await dispatched(api, session)
        await api.call(session, web["id"], event["call_id"], "result", text="rain")
        answer = await asyncio.wait_for(calling, 10)
    assert answer.status_code == 200, answer.text
    assert answer_of(answer)["result"]["content"] == [{"type": "text", "text": "rain"}]


async def allow_origins(api: Api, session: Session, *origins: str) -> None:
    answer = await api.key.put(f"/v1/agents/{session.agent_id}/security", json={"allowed_origins": list(origins)})
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("client_name", [None, "web"])
async def test_an_origin_the_agent_does_not_allow_is_403_even_the_apis_own(api: Api, client_name: str | None) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    await allow_origins(api, session, "https://app.example")
    url = endpoint(api, session, client_name)
    body = modern_body("tools/list")
    async with httpx2.AsyncClient(timeout=10) as http:
        # Another site; then a page whose name was rebound to this server (its Origin matches the Host it
        # sent); then the API's own origin, which the agent does not list either.
        for origin, host in (
            ("https://evil.example", None),
            ("http://evil.example", "evil.example"),
            (api.stack.url, None),
        ):
            headers = modern_headers(session, "tools/list", Origin=origin)
            if host is not None:
                headers["Host"] = host
            answer = await http.post(url, json=body, headers=headers)
            assert answer.status_code == 403, (origin, answer.text)
            assert answer.json()["error"]["code"] == "forbidden"
        allowed = await http.post(
            url, json=body, headers=modern_headers(session, "tools/list", Origin="https://app.example")
        )
        assert allowed.status_code == 200, allowed.text
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        # A caller that is no browser sends no Origin.
        assert (await http.post(url, json=body, headers=modern_headers(session, "tools/list"))).status_code == 200


async def test_a_client_endpoint_admits_what_mcp_admits(api: Api, api_key: str) -> None:
    session = await api.session()
    other = await api.session()
    await api.register(session, tools=[LOOKUP])
    url = endpoint(api, session, "web")
    body = modern_body("tools/list")
    async with httpx2.AsyncClient(timeout=10) as http:
        for token, status in (("", 401), ("swb_st_nonsense", 401), (other.token, 404), (api_key, 200)):
            headers = modern_headers(session, "tools/list")
            if token:
                headers["Authorization"] = f"Bearer {token}"
            else:
                del headers["Authorization"]
            answer = await http.post(url, json=body, headers=headers)
            assert answer.status_code == status, (token, answer.text)
        for method in ("GET", "DELETE"):
            answer = await http.request(method, url, headers={"Authorization": f"Bearer {session.token}"})
            assert answer.status_code == 405


@pytest.mark.parametrize("client_name", [None, "web"])
@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("resources/list", {}, None),
        ("resources/templates/list", {}, None),
        ("resources/read", {"uri": "test://static-text"}, "test://static-text"),
        ("prompts/list", {}, None),
        ("prompts/get", {"name": "greeting"}, "greeting"),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "b"}},
            None,
        ),
    ],
)
async def test_a_session_has_no_resources_prompts_or_completions_and_says_method_not_found(
    api: Api, client_name: str | None, method: str, params: dict[str, Any], name: str | None
) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.post(
            endpoint(api, session, client_name),
            json=modern_body(method, params),
            headers=modern_headers(session, method, name),
        )
    assert answer.status_code == 404, answer.text
    assert answer.json()["error"]["code"] == -32601


async def test_both_endpoints_share_the_sessions_stream_cap(settings: Settings, redis_url: str, api_key: str) -> None:
    async with running_api(settings, redis_url, api_key, {"max_streams_per_session": 2}) as api:
        session = await api.session()
        await api.register(session, tools=[LOOKUP])
        # Calls the client never acks, held open (each answer's head read) until the block ends: at a
        # handshake revision, whose answer starts its event stream at once (2026-07-28's waits for the
        # first event).
        held = [
            (endpoint(api, session, None), "client__web__lookup"),
            (endpoint(api, session, "web"), "lookup"),
        ]
        headers = {
            "Authorization": f"Bearer {session.token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        async with httpx2.AsyncClient(timeout=10) as http, contextlib.AsyncExitStack() as calls:
            for url, tool in held:
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": {"word": "hold"}},
                }
                opened = await calls.enter_async_context(http.stream("POST", url, json=body, headers=headers))
                assert opened.status_code == 200
            body = modern_body("tools/call", {"name": "lookup", "arguments": {"word": "more"}})
            refused = await http.post(
                endpoint(api, session, "web"), json=body, headers=modern_headers(session, "tools/call", "lookup")
            )
        assert refused.status_code == 429
        assert "SWITCHBOARD_MAX_STREAMS_PER_SESSION" in refused.text


@pytest.mark.parametrize("client_name", [None, "web"])
@pytest.mark.parametrize("mode", MODES)
async def test_the_mcp_client_from_an_origin_the_agent_does_not_allow_is_refused(
    api: Api, client_name: str | None, mode: str
) -> None:
    session = await api.session()
    await api.register(session, tools=[LOOKUP])
    await allow_origins(api, session, "https://app.example")
    for origin, served in (("https://evil.example", False), ("https://app.example", True)):
        statuses: list[int] = []

        async def seen(response: httpx2.Response, into: list[int] = statuses) -> None:
            into.append(response.status_code)

        headers = {"Authorization": f"Bearer {session.token}", "Origin": origin}
        async with httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [seen]}) as http:
            transport = streamable_http_client(endpoint(api, session, client_name), http_client=http)
            names: list[str] = []
            with contextlib.suppress(Exception) if not served else contextlib.nullcontext():
                async with Client(transport, cache=None, mode=mode) as client:
                    names = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
        if served:
            assert names == (["lookup"] if client_name else ["client__web__lookup"])
            assert set(statuses) <= {200, 202}, statuses
        else:
            # Refused at the first request, whichever the revision makes it (discover or initialize).
            assert (names, set(statuses)) == ([], {403}), statuses


async def test_a_modern_call_reads_the_sessions_tools_once(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    # The package's header check lists the tools before the call looks its tool up: one read serves both.
    session = await api.session()
    web = await api.register(session, tools=[REGION])
    reads: list[str] = []
    offered = Runs.offered

    async def counted(runs: Runs, session_id: str) -> list[OfferedClient]:
        reads.append(session_id)
        return await offered(runs, session_id)

    monkeypatch.setattr(Runs, "offered", counted)
    body = modern_body("tools/call", {"name": "client__web__forecast", "arguments": {"region": "north"}})
    headers = modern_headers(session, "tools/call", "client__web__forecast", **{"Mcp-Param-Region": "north"})
    async with httpx2.AsyncClient(timeout=10) as http:
        calling = asyncio.create_task(http.post(endpoint(api, session, None), json=body, headers=headers))
        (event,) = await dispatched(api, session)
        await api.call(session, web["id"], event["call_id"], "result", text="rain")
        answer = await asyncio.wait_for(calling, 10)
    assert answer.status_code == 200, answer.text
    assert reads == [session.id]
