"""Drives the real `subako` SDK, unchanged, against a running Switchboard.

Run by `tests/contract/test_sdk.py` under Python 3.12 in a virtualenv holding `subako`; never imported by
the test suite itself. Each scenario prints one JSON line, `{"scenario", "ok", "detail"}`. A scenario that
needs the API restarted prints `{"pause": "restart-api"}` and waits for a line on stdin: that API is one of
its own (`SWITCHBOARD_RESTART_URL`, on the same Redis and worker), so the other scenarios run meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from uuid import UUID

import httpx
from pydantic import BaseModel
from subako import (
    ApprovalDecisionBody,
    ClientCallResultBody,
    ConflictError,
    CreateAgentBody,
    CreatedSessionBody,
    CreatedSessionReceiptBody,
    CreateSessionBody,
    ListSessionsQuery,
    MintApiKeyBody,
    MintedApiKeyBody,
    NotFoundError,
    PostSessionEventBody,
    PublishAgentVersionBody,
    PutAgentSecurityBody,
    RegisterClientBody,
    RequestOptions,
    SessionTokenBody,
    SessionTokenReceiptBody,
    SubakoClient,
    Tool,
    ToolCall,
    TtlClientLifetimeForm,
    TtlClientLifetimeFormData,
)

URL = os.environ["SWITCHBOARD_URL"]
KEY = os.environ["SWITCHBOARD_API_KEY"]
RESTART_URL = os.environ.get("SWITCHBOARD_RESTART_URL", URL)
Scenario = Callable[["Context"], Awaitable[str]]


class RowArgs(BaseModel):
    row_id: str


class Context:
    def __init__(self, admin: SubakoClient, agent_id: str) -> None:
        self.admin = admin
        self.agent_id = agent_id

    async def session(self, url: str = URL) -> tuple[str, SubakoClient]:
        """A new session and a client of the API at `url` that holds only its session token (the frontend
        pattern)."""
        created = await self.admin.sessions.create(CreateSessionBody(agent_id=UUID(self.agent_id)))
        assert isinstance(created, CreatedSessionBody)
        return str(created.id), SubakoClient(base_url=url, api_key=created.session_token)


async def until(check: Callable[[], bool], timeout: float = 15) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        if loop.time() > end:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.02)


def last_text(connection: Any) -> str:
    message = connection.transcript[-1].message
    return "".join(block.data.text for block in message.content if block.type == "text")


def finished(connection: Any, runs: int = 1) -> Callable[[], bool]:
    ended = ("run_completed", "run_failed", "run_cancelled")
    return lambda: sum(e.type in ended for e in connection.events) >= runs and not connection.is_running


async def highlight(args: RowArgs, call: ToolCall) -> str:
    return f"Row {args.row_id} is highlighted."


async def setup(admin: SubakoClient) -> str:
    providers = [p async for p in await admin.model_providers.list()]
    scripted = next(p for p in providers if p.display_name == "Scripted")
    agent = await admin.agents.create(CreateAgentBody(name="sdk contract"))
    config = {"format": "openai_responses", "model": "scripted", "max_tokens": 1000, "context_window": 8000}
    version = await admin.agents.publish_version(
        agent.id, PublishAgentVersionBody(model_provider_id=scripted.id, model=config)
    )
    assert version.version == 1
    assert version.config == {"model": config}
    return str(agent.id)


async def admin_routes(ctx: Context) -> str:
    """Keys, security, session create and its replay, tokens, get and list."""
    admin = ctx.admin
    minted = await admin.api_keys.mint(MintApiKeyBody(label="contract", permissions=["session.read"]))
    assert isinstance(minted, MintedApiKeyBody)
    assert minted.secret.startswith("swb_ak_")
    revoked = await admin.api_keys.revoke(minted.id)
    assert revoked.revoked_at is not None
    security = await admin.agents.set_security(ctx.agent_id, PutAgentSecurityBody(allowed_origins=None))
    assert security.allowed_origins == []
    once = RequestOptions(idempotency_key="contract-session")
    first = await admin.sessions.create(CreateSessionBody(agent_id=UUID(ctx.agent_id)), once)
    again = await admin.sessions.create(CreateSessionBody(agent_id=UUID(ctx.agent_id)), once)
    assert isinstance(first, CreatedSessionBody)
    assert isinstance(again, CreatedSessionReceiptBody)
    assert again.id == first.id
    try:
        await admin.sessions.create(CreateSessionBody(agent_id=UUID(ctx.agent_id), display_name="other"), once)
        raise AssertionError("a reused key with another body must be refused")
    except ConflictError:
        pass
    token = await admin.sessions.mint_token(first.id, RequestOptions(idempotency_key="t"))
    replayed = await admin.sessions.mint_token(first.id, RequestOptions(idempotency_key="t"))
    assert isinstance(token, SessionTokenBody)
    assert isinstance(replayed, SessionTokenReceiptBody)
    fetched = await admin.sessions.get(first.id)
    assert fetched.status.value == "idle"
    listed = [s.id async for s in await admin.sessions.list(ListSessionsQuery(limit=1))]
    assert first.id in listed
    # A session made with the `subject` extension reads through the SDK as any other.
    async with httpx.AsyncClient(base_url=URL, headers={"Authorization": f"Bearer {KEY}"}) as key:
        made = await key.post("/v1/sessions", json={"agent_id": ctx.agent_id, "subject": "user-42"})
        assert made.status_code == 201, made.text
    subjected = await admin.sessions.get(UUID(made.json()["id"]))
    assert subjected.status.value == "idle"
    assert subjected.id in [s.id async for s in await admin.sessions.list(ListSessionsQuery(limit=1))]
    return f"{len(listed)} sessions listed a page of 1 at a time"


async def tool_round_trip(ctx: Context) -> str:
    """The quickstart's frontend (docs/getting-started.md): session token only, history, a typed tool, send, read."""
    session_id, client = await ctx.session()
    async with client, client.sessions.connect(session_id, history=True) as connection:
        web = connection.create_tool_client("web")
        web.add_tool("highlight_row", Tool(description="Highlight a row", parameters=RowArgs, execute=highlight))
        await web.ready()
        assert web.name == "web"
        assert web.id == str(UUID(web.id))
        outcome = await connection.send('/call client__web__highlight_row {"row_id": "42"}')
        assert outcome.outcome.value == "new_run"
        await until(finished(connection))
        assert last_text(connection) == "client__web__highlight_row: Row 42 is highlighted."
        call = connection.transcript[-2].tool_calls[0]
        assert call.name == "client__web__highlight_row"
        assert call.result is not None
        assert call.result.is_error is False
        kinds = [e.type for e in connection.events]
        start = kinds.index("message_user")
        assert kinds[start:] == [
            "message_user", "run_queued", "run_started", "message_assistant", "tool_call",
            "client_tool_dispatched", "client_tool_acked", "tool_result", "message_assistant", "run_completed",
        ]  # fmt: skip
    return "round trip in order"


async def parallel_names_and_errors(ctx: Context) -> str:
    """Two clients asking for `web` (the second is `web-2`), parallel calls, a tool that raises."""
    session_id, client = await ctx.session()

    async def explode(args: RowArgs, call: ToolCall) -> str:
        raise RuntimeError(f"row {args.row_id} is on fire")

    async def refuse(args: RowArgs, call: ToolCall) -> ClientCallResultBody:
        return ClientCallResultBody(text="not allowed", is_error=True)

    async with client, client.sessions.connect(session_id, history=True) as connection:
        first = connection.create_tool_client("web")
        first.add_tool("highlight_row", Tool(description="h", parameters=RowArgs, execute=highlight))
        second = connection.create_tool_client("web")
        second.add_tool("explode", Tool(description="x", parameters=RowArgs, execute=explode))
        second.add_tool("refuse", Tool(description="r", parameters=RowArgs, execute=refuse))
        await asyncio.gather(first.ready(), second.ready())
        assert sorted([first.name, second.name]) == ["web", "web-2"]
        other = "web-2" if first.name == "web" else "web"
        lines = [
            f'/call client__{first.name}__highlight_row {{"row_id": "1"}}',
            f'/call client__{other}__explode {{"row_id": "2"}}',
            f'/call client__{other}__refuse {{"row_id": "3"}}',
            f'/call client__{first.name}__highlight_row {{"wrong": 1}}',
            "/call client__nobody__x",
        ]
        await connection.send("\n".join(lines))
        await until(finished(connection))
        answer = last_text(connection)
        lines = answer.splitlines()
        assert lines[0] == f"client__{first.name}__highlight_row: Row 1 is highlighted."
        assert lines[1] == f"client__{other}__explode failed: row 2 is on fire"
        assert lines[2] == f"client__{other}__refuse failed: not allowed"
        # Checked against the tool's schema before dispatch: this call never reached the SDK's client.
        tool = f"client__{first.name}__highlight_row"
        assert lines[3] == (
            f"{tool} failed: the arguments of {tool} do not match its schema: "
            "at $: 'row_id' is a required property (rule: required)"
        )
        assert lines[-1].startswith("client__nobody__x failed: no client named nobody"), answer
    return "5 parallel calls, one continuation"


async def cancel_and_leave(ctx: Context) -> str:
    """`cancel` stops a sleeping run; `leave` sends the DELETE and the server says `departed`."""
    session_id, client = await ctx.session()
    async with client, client.sessions.connect(session_id, history=True) as connection:
        sent = await connection.send("/sleep 30")
        await until(lambda: connection.is_running)
        cancelled = await connection.cancel()
        assert cancelled.run_id == sent.run_id
        await until(finished(connection))
        assert connection.events[-1].type == "run_cancelled"
        idle = await connection.cancel()
        assert idle.run_id is None
        web = connection.create_tool_client("web")
        await web.ready()
        await web.leave()
        assert web.status.value == "left"
        await until(lambda: any(e.type == "client_left" for e in connection.events))
        left = next(e for e in connection.events if e.type == "client_left")
        assert left.reason.value == "departed"
    return "cancelled and left"


async def history_and_positions(ctx: Context) -> str:
    """A second connection reads the same log from history; `after_seq` starts where it says."""
    session_id, client = await ctx.session()
    async with client:
        async with client.sessions.connect(session_id, history=True) as connection:
            await connection.send("hello")
            await until(finished(connection))
            seen = [e.model_dump() for e in connection.events]
        async with client.sessions.connect(session_id, history=True) as again:
            assert [e.model_dump() for e in again.events] == seen
        async with client.sessions.connect(session_id, after_seq=2) as later:
            await later.send("again")
            await until(finished(later))
            assert later.events[0].seq == 3
        pages = [e.seq async for e in await client.sessions.list_events(session_id)]
        assert pages == sorted(pages, reverse=True)
    return f"{len(seen)} events replayed identically"


async def ttl_client_stays_alive(ctx: Context) -> str:
    """A ttl 5 client pings every 2.5 s and still serves after its first ttl has passed."""
    session_id, client = await ctx.session()
    lifetime = TtlClientLifetimeForm(type="ttl", data=TtlClientLifetimeFormData(seconds=5))
    async with client, client.sessions.connect(session_id, history=True) as connection:
        web = connection.create_tool_client("web", lifetime=lifetime)
        web.add_tool("highlight_row", Tool(description="h", parameters=RowArgs, execute=highlight))
        await web.ready()
        await asyncio.sleep(6.5)
        assert web.status.value == "serving"
        await connection.send('/call client__web__highlight_row {"row_id": "9"}')
        await until(finished(connection))
        assert last_text(connection) == "client__web__highlight_row: Row 9 is highlighted."
        assert not any(e.type == "client_left" for e in connection.events)
    return "alive after 6.5 s on a 5 s ttl"


async def reconnect_after_restart(ctx: Context) -> str:
    """The API process restarts under an open connection: the SDK reconnects with Last-Event-ID and the
    registration (in Redis) keeps serving; nothing is missed or repeated."""
    session_id, client = await ctx.session(RESTART_URL)
    async with client, client.sessions.connect(session_id, history=True) as connection:
        web = connection.create_tool_client("web")
        web.add_tool("highlight_row", Tool(description="h", parameters=RowArgs, execute=highlight))
        await web.ready()
        await connection.send("before")
        await until(finished(connection))
        print(json.dumps({"pause": "restart-api"}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        await until(lambda: connection.status.value == "open" and connection.error is None, timeout=30)
        sent = await connection.send('/call client__web__highlight_row {"row_id": "5"}')
        await until(finished(connection, runs=2), timeout=30)
        assert last_text(connection) == "client__web__highlight_row: Row 5 is highlighted."
        # Strictly rising, none twice; gaps are the timing events the default stream leaves out.
        seqs = [e.seq for e in connection.events]
        assert seqs == sorted(set(seqs)), seqs
        assert str(sent.run_id) in {getattr(e, "run_id", None) for e in connection.events}
    return f"{len(seqs)} events, in order and none twice, across a restart"


async def deleted_session_fails_the_stream(ctx: Context) -> str:
    """Deleting the session closes its streams; the reconnect gets 404 and the connection fails."""
    session_id, client = await ctx.session()
    async with client:
        connection = client.sessions.connect(session_id, history=True)
        await connection.ready()
        await ctx.admin.sessions.delete(session_id)
        await until(lambda: connection.status.value == "failed", timeout=20)
        assert isinstance(connection.error, NotFoundError)
        try:
            await client.sessions.get(session_id)
            raise AssertionError("a deleted session must be gone")
        except NotFoundError:
            pass
    return "failed with NotFoundError"


async def approvals_through_the_sdk(ctx: Context) -> str:
    """A gated tool: the SDK lists the pending approval, resolves it, and the tool runs."""
    # Policies are an extension the SDK does not model (so published through a raw HTTP client).
    policies = {"client__web__*": "require_approval"}
    session_id, token = await _session_with(ctx.admin, "gated", client_tool_policies=policies)
    async with (
        SubakoClient(base_url=URL, api_key=token) as client,
        client.sessions.connect(session_id, history=True) as connection,
    ):
        web = connection.create_tool_client("web")
        web.add_tool("highlight_row", Tool(description="h", parameters=RowArgs, execute=highlight))
        await web.ready()
        await connection.send(
            '/call client__web__highlight_row {"row_id": "3"}\n/call client__web__highlight_row {"row_id": "4"}'
        )
        await until(lambda: len(connection.approvals) == 2)
        first, second = connection.approvals
        assert first.server == "client:web"
        assert first.arguments == {"row_id": "3"}
        allowed = await connection.resolve_approval(first.call_id, ApprovalDecisionBody.allow)
        denied = await connection.resolve_approval(second.call_id, ApprovalDecisionBody.deny)
        assert (allowed.decision.value, denied.decision.value) == ("allow", "deny")
        try:
            await connection.resolve_approval(first.call_id, ApprovalDecisionBody.deny, "changed my mind")
            raise AssertionError("a second decision must be refused")
        except ConflictError:
            pass
        await until(finished(connection))
        assert connection.approvals == []
        calls = connection.transcript[-2].tool_calls
        assert [c.approval.value if c.approval else None for c in calls] == ["allowed", "denied"]
        assert last_text(connection).splitlines() == [
            "client__web__highlight_row: Row 3 is highlighted.",
            "client__web__highlight_row failed: the user denied this call",
        ]
    return "listed, allowed, denied, second decision refused"


async def approval_deadline_through_the_sdk(ctx: Context) -> str:
    """An approval with a deadline (an extension): nobody decides, it resolves as a deny the SDK reads as
    any deny (its `reason` an extra field it ignores), and the run goes on."""
    policies = {"client__web__*": {"policy": "require_approval", "approval_timeout_s": 1}}
    session_id, token = await _session_with(ctx.admin, "timed", client_tool_policies=policies)
    async with (
        SubakoClient(base_url=URL, api_key=token) as client,
        client.sessions.connect(session_id, history=True) as connection,
    ):
        web = connection.create_tool_client("web")
        web.add_tool("highlight_row", Tool(description="h", parameters=RowArgs, execute=highlight))
        await web.ready()
        await connection.send('/call client__web__highlight_row {"row_id": "3"}')
        await until(lambda: len(connection.approvals) == 1)
        await until(finished(connection))
        assert connection.approvals == []
        calls = connection.transcript[-2].tool_calls
        assert [c.approval.value if c.approval else None for c in calls] == ["denied"]
        assert last_text(connection).startswith("client__web__highlight_row failed: the call was denied")
    return "asked, ran out, denied, run finished"


async def raw_register_shapes(ctx: Context) -> str:
    """The low-level client routes the tool client uses, called directly."""
    session_id, client = await ctx.session()
    async with client:
        lifetime = TtlClientLifetimeForm(type="ttl", data=TtlClientLifetimeFormData(seconds=60))
        registered = await client.sessions.register_client(
            session_id, RegisterClientBody(name="raw", lifetime=lifetime, tools=[])
        )
        assert registered.expires_at is not None
        ping = await client.sessions.ping_client(session_id, registered.id)
        assert ping.expires_at is not None
        await client.sessions.leave_client(session_id, registered.id)
        try:
            await client.sessions.ping_client(session_id, registered.id)
            raise AssertionError("a ping after leaving must be 404")
        except NotFoundError:
            pass
        outcome = await client.sessions.post_event(session_id, PostSessionEventBody(type="input", text="x"))
        assert outcome.outcome.value == "new_run"
    return "register, ping, leave, 404"


async def waiting_call_taken_by_the_sdk(ctx: Context) -> str:
    """A call of a tool declared `on_leave: "wait"` (an extension) outlives its registration: a raw `web`
    holding it leaves, the SDK's own `web` tool client comes and is dispatched it under the same call id,
    and the SDK answers it. The SDK's default view never carries the extension event of the wait."""
    session_id, token = await _session_with(ctx.admin, "waiting")
    base = f"/v1/sessions/{session_id}"
    tool = {"name": "highlight_row", "description": "h", "parameters": {"type": "object"}, "on_leave": "wait"}
    async with (
        httpx.AsyncClient(base_url=URL, headers={"Authorization": f"Bearer {token}"}) as raw,
        SubakoClient(base_url=URL, api_key=token) as client,
        client.sessions.connect(session_id, history=True) as connection,
    ):
        registration = {"name": "web", "lifetime": {"type": "never"}, "tools": [tool]}
        tab = (await raw.post(f"{base}/clients", json=registration)).json()["id"]
        await connection.send('/call client__web__highlight_row {"row_id": "9"}')
        call_id = (await _dispatched(raw, session_id, tab, 1))["highlight_row"]
        assert (await raw.delete(f"{base}/clients/{tab}")).status_code == 204
        web = connection.create_tool_client("web")
        web.add_tool("highlight_row", Tool(description="h", parameters=RowArgs, execute=highlight))
        await web.ready()
        assert web.name == "web"
        await until(finished(connection))
        assert last_text(connection) == "client__web__highlight_row: Row 9 is highlighted."
        sent = [e for e in connection.events if e.type == "client_tool_dispatched"]
        assert [(str(e.client_id), e.call_id) for e in sent] == [(tab, call_id), (web.id, call_id)]
        assert "client_tool_waiting" not in [e.type for e in connection.events]
        assert not any(e.type == "client_tool_failed" for e in connection.events)
    return "a call waited for its client and the SDK's client answered it"


# A 1x1 PNG (one red pixel).
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="


async def _dispatched(raw: httpx.AsyncClient, session_id: str, client_id: str, count: int) -> dict[str, str]:
    """Tool name -> call id of the calls dispatched to one registration, once `count` of them are."""
    for _ in range(500):
        page = (await raw.get(f"/v1/sessions/{session_id}/events", params={"order": "asc", "limit": 200})).json()
        found = {
            e["tool"]: e["call_id"]
            for e in page["items"]
            if e["type"] == "client_tool_dispatched" and e["client_id"] == client_id
        }
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError("the calls were never dispatched")


async def _session_with(admin: SubakoClient, name: str, **config: Any) -> tuple[str, str]:
    """A session of a new scripted agent whose version adds `config` (extensions the SDK's publish body
    lacks, so published with the API key by hand): its id and session token."""
    providers = [p async for p in await admin.model_providers.list()]
    scripted = next(p for p in providers if p.display_name == "Scripted")
    agent = await admin.agents.create(CreateAgentBody(name=name))
    model = {"format": "openai_responses", "model": "scripted", "max_tokens": 1000, "context_window": 8000}
    body = {"model_provider_id": str(scripted.id), "model": model, **config}
    async with httpx.AsyncClient(base_url=URL, headers={"Authorization": f"Bearer {KEY}"}) as key:
        published = await key.post(f"/v1/agents/{agent.id}/versions", json=body)
        assert published.status_code == 201, published.text
    created = await admin.sessions.create(CreateSessionBody(agent_id=agent.id))
    assert isinstance(created, CreatedSessionBody)
    return str(created.id), created.session_token


@contextlib.asynccontextmanager
async def _followed(session_id: str, token: str) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """The session followed by the SDK (history and live) with a `web` tool client serving highlight_row,
    and a raw client holding the session token for the extension routes."""
    async with (
        httpx.AsyncClient(base_url=URL, headers={"Authorization": f"Bearer {token}"}) as raw,
        SubakoClient(base_url=URL, api_key=token) as client,
        client.sessions.connect(session_id, history=True) as connection,
    ):
        web = connection.create_tool_client("web")
        web.add_tool("highlight_row", Tool(description="h", parameters=RowArgs, execute=highlight))
        await web.ready()
        yield raw, connection


async def extensions_in_use(ctx: Context) -> str:
    """Every extension of the call routes used on a session the SDK follows: per-tool deadlines, progress,
    an image result, one call cancelled, arguments refused by the schema, an approval remembered. The
    SDK's default view must take all of it, live and from the log."""
    policies = {"client__pics__slow": "require_approval"}
    session_id, token = await _session_with(ctx.admin, "extended", client_tool_policies=policies)
    base = f"/v1/sessions/{session_id}"
    async with _followed(session_id, token) as (raw, connection):
        tools = [
            {"name": "snap", "description": "A picture", "parameters": {"type": "object"}, "timeout_s": 60},
            {"name": "slow", "description": "Slow", "parameters": {"type": "object"}, "heartbeat_s": 30},
        ]
        registration = {"name": "pics", "lifetime": {"type": "never"}, "tools": tools}
        pics = (await raw.post(f"{base}/clients", json=registration)).json()["id"]
        calls = f"{base}/clients/{pics}/calls"

        await connection.send(
            "/call client__pics__snap\n/call client__pics__slow\n"
            '/call client__web__highlight_row {"row_id": "1"}\n/call client__web__highlight_row {"row_id": 5}'
        )
        await until(lambda: len(connection.approvals) == 1)
        (approval,) = connection.approvals
        allow = {"decision": "allow", "remember": "session"}
        assert (await raw.post(f"{base}/approvals/{approval.call_id}", json=allow)).status_code == 200
        ids = await _dispatched(raw, session_id, pics, 2)
        for call_id in ids.values():
            assert (await raw.post(f"{calls}/{call_id}/ack")).status_code == 200
        progress = {"message": "halfway", "fraction": 0.5}
        assert (await raw.post(f"{calls}/{ids['slow']}/progress", json=progress)).status_code == 200
        content = [{"type": "text", "text": "a dot"}, {"type": "image", "media_type": "image/png", "data": PIXEL}]
        assert (await raw.post(f"{calls}/{ids['snap']}/result", json={"content": content})).status_code == 204
        cancelled = await raw.post(f"{base}/calls/{ids['slow']}/cancel", json={"message": "stop"})
        assert cancelled.status_code == 200, cancelled.text
        await until(finished(connection))
        assert last_text(connection).splitlines() == [
            "client__pics__snap: a dot",
            "client__pics__slow failed: the call was cancelled: stop",
            "client__web__highlight_row: Row 1 is highlighted.",
            "client__web__highlight_row failed: the arguments of client__web__highlight_row do not match its "
            "schema: at $.row_id: 5 is not of type 'string' (rule: type)",
        ]
        # The remembered approval decides the next call of the gated tool without asking.
        await connection.send("/call client__pics__slow")
        await until(lambda: sum(e.type == "client_tool_dispatched" for e in connection.events) == 4)
        assert connection.approvals == []
        remembered = [e for e in connection.events if e.type == "approval_resolved"][-1]
        assert remembered.decision.value == "allow"
        kinds = [e.type for e in connection.events]
        assert "client_tool_progress" not in kinds
    # Read back from the log through the SDK's listing as well.
    async with SubakoClient(base_url=URL, api_key=token) as reader:
        listed = [e async for e in await reader.sessions.list_events(session_id)]
        results = [e for e in listed if e.type == "tool_result"]
        assert any("[image/png, 1 KB]" in str(e) for e in results)
    return "deadlines, progress, image, cancel, schema check and a remembered approval, live and listed"


async def _mcp_request(raw: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC request to the session's MCP endpoint (stateless Streamable HTTP, no handshake), its
    answer read from the JSON body or the event stream's last `data` line."""
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    answer = await raw.post(path, json=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    if answer.headers["content-type"].startswith("application/json"):
        found: dict[str, Any] = answer.json()
        return found
    data = [line[5:].strip() for line in answer.text.splitlines() if line.startswith("data:")]
    found = json.loads(data[-1])
    return found


async def mcp_in_use(ctx: Context) -> str:
    """An agent with an MCP grant (a server of the `mcp` package), its tools called, one after an
    approval; and an MCP client's call through the session's own MCP endpoint, answered by the SDK's tool
    client outside any run. The SDK's view must take all of it, live and from the log."""
    grant: dict[str, Any] = {"name": "kit", "url": os.environ["SWITCHBOARD_MCP_URL"], "default_policy": "allow"}
    grant["tools"] = [{"name": "picture", "policy": "require_approval"}]
    session_id, token = await _session_with(ctx.admin, "with-mcp", mcp=[grant])
    base = f"/v1/sessions/{session_id}"
    async with _followed(session_id, token) as (raw, connection):
        await connection.send(
            '/call mcp__kit__add {"a": 2, "b": 3}\n/call mcp__kit__picture\n/call mcp__kit__fails\n/call mcp__kit__rich'
        )
        await until(lambda: len(connection.approvals) == 1)
        (approval,) = connection.approvals
        assert (approval.server, approval.tool) == ("kit", "picture"), approval
        assert (await raw.post(f"{base}/approvals/{approval.call_id}", json={"decision": "allow"})).status_code == 200
        await until(finished(connection))
        lines = last_text(connection).splitlines()
        # The scripted model reads a result's text blocks one after another: "5" and its structured JSON.
        assert lines[0] == 'mcp__kit__add: 5{"result":5}', lines
        assert any(line.startswith("mcp__kit__picture: a red pixel") for line in lines), lines
        assert any(line.startswith("mcp__kit__fails failed: ") for line in lines), lines
        # Audio, resources and a link (extensions) reach the SDK's default view as text naming them.
        assert any(line.startswith("mcp__kit__rich: all kinds") for line in lines), lines

        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call["params"] = {"name": "client__web__highlight_row", "arguments": {"row_id": "9"}}
        answered = await _mcp_request(raw, f"{base}/mcp", call)
        assert answered["result"]["content"] == [{"type": "text", "text": "Row 9 is highlighted."}], answered
        await until(lambda: sum(e.type == "tool_result" for e in connection.events) == 5)
        assert connection.approvals == []
    async with SubakoClient(base_url=URL, api_key=token) as reader:
        listed = [e async for e in await reader.sessions.list_events(session_id)]
        results = [e for e in listed if e.type == "tool_result"]
        assert len(results) == 5
        assert any("[image/png, 1 KB]" in str(e) for e in results)
        assert any("[audio: audio/wav, 1 KiB]" in str(e) for e in results)
    return (
        "grant tools with an approval, an image and audio, resources and a link, and an MCP client's call "
        "answered by the SDK, live and listed"
    )


async def _door_run(raw: httpx.AsyncClient, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """One request to a front door of the session; the events (or chunks) of its answer, whole."""
    answer = await raw.post(path, json=body, headers={"Accept": "text/event-stream"}, timeout=30)
    assert answer.status_code == 200, answer.text
    lines = [line[5:].strip() for line in answer.text.splitlines() if line.startswith("data:")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


async def front_doors_in_use(ctx: Context) -> str:
    """A frontend on the AG-UI door, on a session the SDK follows with its own tool client: the
    frontend's tool called and answered, the SDK's tool called in the same step. The SDK's view must take
    all of it, live and from the log."""
    session_id, token = await _session_with(ctx.admin, "behind-ag-ui")
    door = f"/v1/sessions/{session_id}/ag-ui"
    pick = {"name": "pick_color", "description": "Ask the user for a color.", "parameters": {"type": "object"}}
    text = '/call pick_color {"hue": 1}\n/call client__web__highlight_row {"row_id": "4"}'
    user = {"id": "door-u1", "role": "user", "content": text}
    async with _followed(session_id, token) as (raw, connection):
        first = await _door_run(raw, door, {"threadId": "t", "runId": "r1", "messages": [user], "tools": [pick]})
        assert first[-1]["type"] == "RUN_FINISHED", first
        (pending,) = first[-1]["outcome"]["pendingToolCallIds"]
        results = [e for e in first if e["type"] == "TOOL_CALL_RESULT"]
        assert [r["content"] for r in results] == ["Row 4 is highlighted."], first
        calls = [{"id": pending, "type": "function", "function": {"name": "pick_color", "arguments": "{}"}}]
        assistant = {"id": "a1", "role": "assistant", "toolCalls": calls}
        tool = {"id": "t1", "role": "tool", "toolCallId": pending, "content": "green"}
        second = await _door_run(raw, door, {"threadId": "t", "runId": "r2", "messages": [user, assistant, tool]})
        assert second[-1]["type"] == "RUN_FINISHED", second
        await until(finished(connection))
        assert "pick_color: green" in last_text(connection)
        # The AI SDK door on the same session: a useChat frontend's tool, answered by resubmitting.
        chat = f"/v1/sessions/{session_id}/ai-sdk/chat"
        asked = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "/call read_theme {}"}]}
        theme = {"name": "read_theme", "description": "The page's theme.", "parameters": {"type": "object"}}
        chunks = await _door_run(raw, chat, {"id": "c", "messages": [asked], "tools": [theme]})
        (call,) = [c for c in chunks if c["type"] == "tool-input-available"]
        assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}, chunks
        part = {"type": "tool-read_theme", "toolCallId": call["toolCallId"], "state": "output-available",
                "input": {}, "output": "dark"}  # fmt: skip
        answer = {"id": chunks[0]["messageId"], "role": "assistant", "parts": [{"type": "step-start"}, part]}
        await _door_run(raw, chat, {"id": "c", "messages": [asked, answer], "tools": [theme]})
        await until(finished(connection, runs=2))
        assert "read_theme: dark" in last_text(connection)
    async with SubakoClient(base_url=URL, api_key=token) as reader:
        listed = [e async for e in await reader.sessions.list_events(session_id)]
        assert sum(e.type == "tool_result" for e in listed) == 3
    return "an AG-UI and an AI SDK frontend's tools and the SDK's tool on one session, live and listed"


async def input_requests_while_followed(ctx: Context) -> str:
    """A client of a call asks the person (an extension: a form, then a page) while the SDK follows the
    session; someone holding the token answers the form, the page ends with the call. The SDK's view,
    live and from the log, must stay valid: the input_* events come only with `?include=extensions`."""
    session_id, token = await _session_with(ctx.admin, "asking")
    base = f"/v1/sessions/{session_id}"
    async with _followed(session_id, token) as (raw, connection):
        tools = [{"name": "move", "description": "Moves money", "parameters": {"type": "object"}}]
        registration = {"name": "bank", "lifetime": {"type": "never"}, "tools": tools}
        bank = (await raw.post(f"{base}/clients", json=registration)).json()["id"]
        await connection.send('/call client__bank__move\n/call client__web__highlight_row {"row_id": "2"}')
        call_id = (await _dispatched(raw, session_id, bank, 1))["move"]
        calls = f"{base}/clients/{bank}/calls/{call_id}"
        assert (await raw.post(f"{calls}/ack")).status_code == 200
        form = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}
        asked = await raw.post(f"{calls}/input-requests", json={"message": "How much?", "schema": form})
        assert asked.status_code == 201, asked.text
        page = await raw.post(f"{calls}/input-requests", json={"message": "Sign", "url": "https://x.example/s"})
        assert page.status_code == 201, page.text
        answer = {"action": "accept", "content": {"amount": 12}}
        answered = await raw.post(f"{base}/input-requests/{asked.json()['request_id']}", json=answer)
        assert answered.status_code == 200, answered.text
        assert (await raw.post(f"{calls}/result", json={"text": "moved 12"})).status_code == 204
        await until(finished(connection))
        assert last_text(connection).splitlines() == [
            "client__bank__move: moved 12",
            "client__web__highlight_row: Row 2 is highlighted.",
        ]
        assert not [e.type for e in connection.events if e.type.startswith("input_")]
    extended = await _all_events(token, base, include="extensions")
    kinds = [e["type"] for e in extended if e["type"].startswith("input_")]
    assert kinds == ["input_requested", "input_requested", "input_provided", "input_provided"], kinds
    assert not [e for e in await _all_events(token, base) if e["type"].startswith("input_")]
    # The whole log again through the SDK: its listing, and a new connection's history.
    async with SubakoClient(base_url=URL, api_key=token) as reader:
        listed = [e async for e in await reader.sessions.list_events(session_id)]
        assert sum(e.type == "tool_result" for e in listed) == 2
        async with reader.sessions.connect(session_id, history=True) as again:
            await until(finished(again))
            assert last_text(again) == last_text(connection)
    return "a form answered and a page ended with its call while the SDK followed, live and listed"


async def _all_events(token: str, base: str, **params: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=URL, headers={"Authorization": f"Bearer {token}"}) as raw:
        page = (await raw.get(f"{base}/events", params={"order": "asc", "limit": 200, **params})).json()
    items: list[dict[str, Any]] = page["items"]
    return items


async def extension_formats_listed(ctx: Context) -> str:
    """Providers of the extension formats (`openai_chat`, `gemini`) and a version on one, in the workspace
    the SDK lists: its listings stay valid (they hold only the formats it knows) and the extensions show
    to a raw caller that asks for them."""
    admin = ctx.admin
    created: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=URL, headers={"Authorization": f"Bearer {KEY}"}) as key:
        for extension in ("openai_chat", "gemini"):
            body = {"format": extension, "display_name": f"ext {extension}", "api_key": "k",
                    "base_url": "http://127.0.0.1:9/v1", "text_only": True}  # fmt: skip
            answer = await key.post("/v1/model-providers", json=body)
            assert answer.status_code == 201, answer.text
            created[extension] = answer.json()["id"]
        agent = await admin.agents.create(CreateAgentBody(name="extension formats"))
        model = {"format": "openai_chat", "model": "qwen3", "max_tokens": 100, "context_window": 8000}
        published = await key.post(
            f"/v1/agents/{agent.id}/versions", json={"model_provider_id": created["openai_chat"], "model": model}
        )
        assert published.status_code == 201, published.text
        providers = [p async for p in await admin.model_providers.list()]
        assert not set(created.values()) & {str(p.id) for p in providers}
        assert {p.format for p in providers} <= {"anthropic", "openai_responses"}
        versions = [v async for v in await admin.agents.list_versions(agent.id)]
        assert versions == []
        raw = (await key.get("/v1/model-providers", params={"include": "extensions", "limit": 100})).json()
        assert set(created.values()) <= {p["id"] for p in raw["items"]}
        path = f"/v1/agents/{agent.id}/versions"
        raw_versions = (await key.get(path, params={"include": "extensions"})).json()["items"]
        assert [v["config"]["model"]["format"] for v in raw_versions] == ["openai_chat"]
    return f"the SDK listed {len(providers)} providers and no version; raw listings showed the extensions"


async def cloud_provider_listed(ctx: Context) -> str:
    """A provider with a cloud (an extension, docs/providers/clouds.md) created raw: the SDK's listing and
    get still parse it, and no body holds its credentials."""
    body = {
        "format": "anthropic",
        "display_name": "Claude on Bedrock",
        "base_url": "http://127.0.0.1:9",
        "api_key": "unused",
        "cloud": {"type": "bedrock", "region": "us-east-1"},
        "credentials": {"aws_access_key_id": "AKIDCONTRACT", "aws_secret_access_key": "contract-secret"},
    }
    async with httpx.AsyncClient(base_url=URL, headers={"Authorization": f"Bearer {KEY}"}) as raw:
        created = await raw.post("/v1/model-providers", json=body)
        assert created.status_code == 201, created.text
        assert created.json()["cloud"] == body["cloud"], created.text
        provider_id = created.json()["id"]
        assert "contract-secret" not in (await raw.get(f"/v1/model-providers/{provider_id}")).text
    listed = [p async for p in await ctx.admin.model_providers.list()]
    assert any(str(p.id) == provider_id and p.display_name == "Claude on Bedrock" for p in listed), listed
    fetched = await ctx.admin.model_providers.get(provider_id)
    assert fetched.display_name == "Claude on Bedrock"
    assert "contract-secret" not in repr(fetched)
    return f"listed among {len(listed)} providers and fetched"


SCENARIOS: dict[str, Scenario] = {
    "admin_routes": admin_routes,
    "tool_round_trip": tool_round_trip,
    "parallel_names_and_errors": parallel_names_and_errors,
    "cancel_and_leave": cancel_and_leave,
    "history_and_positions": history_and_positions,
    "ttl_client_stays_alive": ttl_client_stays_alive,
    "raw_register_shapes": raw_register_shapes,
    "approvals_through_the_sdk": approvals_through_the_sdk,
    "approval_deadline_through_the_sdk": approval_deadline_through_the_sdk,
    "deleted_session_fails_the_stream": deleted_session_fails_the_stream,
    "reconnect_after_restart": reconnect_after_restart,
    "extensions_in_use": extensions_in_use,
    "mcp_in_use": mcp_in_use,
    "front_doors_in_use": front_doors_in_use,
    "extension_formats_listed": extension_formats_listed,
    "cloud_provider_listed": cloud_provider_listed,
    "waiting_call_taken_by_the_sdk": waiting_call_taken_by_the_sdk,
    "input_requests_while_followed": input_requests_while_followed,
}


async def main(names: list[str]) -> None:
    async with SubakoClient(base_url=URL, api_key=KEY) as admin:
        context = Context(admin, await setup(admin))

        async def run(name: str) -> None:
            try:
                detail = await asyncio.wait_for(SCENARIOS[name](context), timeout=60)
                print(json.dumps({"scenario": name, "ok": True, "detail": detail}), flush=True)
            except BaseException:
                print(json.dumps({"scenario": name, "ok": False, "detail": traceback.format_exc()}), flush=True)

        # All at once: the restart is of an API the others do not use (RESTART_URL), and the slowest
        # scenario (a ttl's 6.5 s) would otherwise be followed by the restart's few seconds.
        await asyncio.gather(*(run(name) for name in names))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or list(SCENARIOS)))
