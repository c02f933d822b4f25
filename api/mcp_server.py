"""Each session as an MCP server (`/v1/sessions/{sid}/mcp`, Streamable HTTP, stateless), through the
official `mcp` package's server side: `tools/list` gives the client tools a step of the session's active
run offers its model, under the names the model sees (a registered client's `client__<name>__<tool>`, the
run's own run-scoped tools their own names), and `tools/call` goes as a model's call does: under the
agent's policy for the tool (a deny answered at once, never dispatched; `require_approval` waits for the
decision, or is decided by one remembered for the session), then to the registration (bound to it, its
ack and result deadlines and the tool's own, arguments checked first), logged as a call from an MCP
client outside any run (`client_tool_dispatched` and `approval_requested` with `"from": "mcp"`). The
caller waits for the call's outcome on the session's live feed; every request holds one of the stream
caps' slots while its answer is open. Progress becomes MCP progress, and an MCP cancel (or the caller
going away) cancels the call."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from api.state import AppState
from broker.errors import NotFound, SwitchboardError
from broker.services.calls import CallState
from broker.services.live import Signal
from broker.services.runs import client_tools, parse_client_tool
from common.events.catalogue import ClientToolProgress, ImageBlock, TextBlock, TextData, ToolResult
from common.events.marks import is_logged
from common.events.read import decode_known
from common.policies import client_rule, denied_text
from common.schema.checks import Unchecked

logger = logging.getLogger(__name__)

# Where the route leaves what it checked for the handlers: (app state, session id, credential).
SCOPE_KEY = "switchboard.mcp"
# How often a waiting call's record is read when the live feed is quiet (a lost pub/sub message).
_CHECK_EVERY_S = 2.0
CANCELLED_BY_CLIENT = "cancelled by the MCP client"
# The reason a call's record gives once an approver denied it.
DENIED = "denied"
_NO_RESULT = "the call ended with no result logged"


def _context(ctx: Any) -> tuple[AppState, str, str]:
    request = ctx.request
    found: tuple[AppState, str, str] = request.scope[SCOPE_KEY]
    return found


def _annotations(tool: dict[str, Any]) -> mt.ToolAnnotations | None:
    hints = tool.get("annotations")
    if not hints:
        return None
    try:
        return mt.ToolAnnotations.model_validate(hints)
    except ValidationError:
        return None


async def _list_tools(ctx: Any, _params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
    state, session_id, _ = _context(ctx)
    tools = [
        mt.Tool(
            name=visible,
            description=tool.get("description") or None,
            input_schema=tool.get("parameters") or {"type": "object"},
            annotations=_annotations(tool),
        )
        for visible, (_, tool) in client_tools(await state.broker.runs.offered(session_id)).items()
    ]
    return mt.ListToolsResult(tools=tools)


def _error(text: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)


def _result(event: ToolResult, settled: CallState | None) -> mt.CallToolResult:
    content: list[Any] = []
    for block in event.content:
        if isinstance(block, ImageBlock):
            content.append(mt.ImageContent(type="image", data=block.data.data, mime_type=block.data.media_type))
        else:
            text = block.data.text if isinstance(block, TextBlock) else ""
            content.append(mt.TextContent(type="text", text=text))
    is_error = event.is_error
    reason = settled.reason if settled is not None else None
    if is_error and reason and reason != DENIED and content and isinstance(content[0], mt.TextContent):
        # The failure reason (client_gone, ack_timeout, result_timeout, run_gone) leads the text; a
        # denial's text is the approver's, as a model reads it.
        content[0] = mt.TextContent(type="text", text=f"{reason}: {content[0].text}")
    return mt.CallToolResult(content=content, is_error=is_error)


async def _call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
    state, session_id, _ = _context(ctx)
    name, arguments = params.name, dict(params.arguments or {})
    # Found as a model's step finds it, by the name the model calls it by (the name its policy goes by).
    found = client_tools(await state.broker.runs.offered(session_id)).get(name)
    if found is None:
        parsed = parse_client_tool(name)
        if parsed is not None:
            return _error(f"no active client {parsed[0]} serves a tool named {parsed[1]} in this session")
        return _error(
            f"no tool named {name} in this session (a client's tools are client__<client name>__<tool>; "
            "the active run's own tools go by their own names)"
        )
    client, tool = found
    # The agent's policy, decided before anything is checked or written: a denied call costs nothing.
    try:
        policies = await state.broker.policies.client_policies(session_id)
    except NotFound as gone:
        return _error(f"{name} cannot be called: the session's agent version cannot be read ({gone.message})")
    rule = client_rule(policies, name, tool.get("annotations"))
    policy = rule.policy
    if policy == "deny":
        return _error(denied_text(name))
    try:
        problem = await state.broker.arguments.problem(tool.get("parameters") or {}, arguments)
    except Unchecked as unchecked:
        return _error(f"the arguments of {name} could not be checked: {unchecked}")
    if problem:
        return _error(f"the arguments of {name} do not match its schema: {problem}")
    # Subscribed before the call is written, so no event of it can be missed. The request's stream slot
    # was taken by SessionMcp.handle.
    subscription = await state.hub.subscribe_session(session_id)
    try:
        try:
            sent = await state.broker.calls.dispatch(
                session_id,
                (client.client_id, client.name),
                str(tool["name"]),
                arguments,
                policy=policy,
                name=name,
                timeout_ms=int(tool.get("timeout_s") or 0) * 1000,
                heartbeat_ms=int(tool.get("heartbeat_s") or 0) * 1000,
                on_leave=str(tool.get("on_leave") or ""),
                approval_timeout_ms=(rule.approval_timeout_s or 0) * 1000,
            )
        except SwitchboardError as refused:
            return _error(refused.message)
        if sent.denial is not None:
            return _result(sent.denial, None)
        try:
            return await _outcome(state, session_id, sent.call_id, sent.seq, subscription, ctx)
        except asyncio.CancelledError:
            # An MCP cancel, or the caller gone: no one waits for the call any more. One still waiting
            # for approval is resolved as denied, so no approver is left asked about it.
            with contextlib.suppress(SwitchboardError):
                await asyncio.shield(state.broker.calls.cancel(session_id, sent.call_id, CANCELLED_BY_CLIENT))
            raise
    finally:
        state.hub.unsubscribe(subscription)


def _ours(item: bytes, call_id: str) -> ClientToolProgress | ToolResult | None:
    """The progress or the result of call `call_id`, or None for anything else of the session (another
    call's event, a delta): nothing to decode for those."""
    if not is_logged(item) or call_id.encode() not in item:
        return None
    event = decode_known(item)
    return event if isinstance(event, ClientToolProgress | ToolResult) and event.call_id == call_id else None


async def _outcome(
    state: AppState, session_id: str, call_id: str, seq: int, subscription: Any, ctx: Any
) -> mt.CallToolResult:
    """The call's result once it has one: read from the live feed, or from the log when the feed missed it."""
    progressed = 0
    while True:
        try:
            item = await asyncio.wait_for(subscription.get(), _CHECK_EVERY_S)
        except TimeoutError:
            item = None
        if item is Signal.DELETED or item is Signal.CLOSING:
            return _error("the session was deleted" if item is Signal.DELETED else "the server is shutting down")
        if isinstance(item, bytes):
            event = _ours(item, call_id)
            if event is None:
                continue
            if isinstance(event, ClientToolProgress):
                progressed += 1
                # A fraction is progress out of 1; without one, progress counts the reports. Sent only
                # when the caller asked for progress (a token on its request).
                fraction = event.fraction
                done, total = (fraction, 1.0) if fraction is not None else (float(progressed), None)
                await ctx.session.report_progress(done, total, event.message)
            else:
                return _result(event, await state.broker.calls.state(session_id, call_id))
            continue
        # A quiet spell or a lag: the record says whether the feed missed the call's end.
        settled = await state.broker.calls.state(session_id, call_id)
        if settled is None:
            return _error("the call is gone (its session was deleted)")
        if settled.settled:
            return _result(await _logged_result(state, session_id, call_id, seq), settled)


async def _logged_result(state: AppState, session_id: str, call_id: str, after: int) -> ToolResult:
    last = after
    while True:
        rows = await state.broker.log.after(session_id, last, 200)
        for row_seq, data in rows:
            last = row_seq
            if b'"type":"tool_result"' in data[:96] and call_id.encode() in data:
                event = decode_known(data)
                if isinstance(event, ToolResult) and event.call_id == call_id:
                    return event
        if len(rows) < 200:
            return ToolResult(call_id=call_id, content=[TextBlock(TextData(_NO_RESULT))], is_error=True)


class SessionMcp:
    """The MCP server every session is, and the transport that serves it statelessly."""

    def __init__(self, max_body_bytes: int) -> None:
        server: Server[Any] = Server("switchboard", on_list_tools=_list_tools, on_call_tool=_call_tool)
        # The API's own CORS, origin checks and auth stand in front; the transport checks no Host header.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self._manager = StreamableHTTPSessionManager(
            server, stateless=True, security_settings=security, max_request_body_size=max_body_bytes
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self._manager.run():
            yield

    async def handle(
        self, state: AppState, session_id: str, credential: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Serve one request, counted as one of the session's and the credential's event streams for as
        long as its answer is open (a call waits for its client's answer, or for an approval): past the
        caps TooManyRequests, before anything of it is read or written."""
        close = state.stream_caps.open(session_id, credential)
        try:
            scope[SCOPE_KEY] = (state, session_id, credential)
            await self._manager.handle_request(scope, receive, send)
        finally:
            close()
