"""Waiting for an MCP-started call's outcome on the session's live feed: its progress reported as MCP
progress, its input requests relayed to the caller (api/mcp/inputs.py), its result as MCP content."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp.types as mt
from mcp.shared.exceptions import MCPError
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY

from api.mcp.content import call_result, error_result
from api.mcp.inputs import Relay
from api.state import AppState
from broker.services.calls import CallState
from broker.services.live import Signal
from common.events.catalogue import ClientToolProgress, InputRequested, TextBlock, TextData, ToolResult
from common.events.marks import is_logged
from common.events.read import decode_known

# How often a waiting call's record is read when the live feed is quiet (a lost pub/sub message).
_CHECK_EVERY_S = 2.0
_NO_RESULT = "the call ended with no result logged"


def _ours(item: bytes, call_id: str) -> ClientToolProgress | ToolResult | InputRequested | None:
    """The progress, an input request or the result of call `call_id`, or None for anything else of the
    session (another call's event, a delta): nothing to decode for those."""
    if not is_logged(item) or call_id.encode() not in item:
        return None
    event = decode_known(item)
    ours = isinstance(event, ClientToolProgress | ToolResult | InputRequested) and event.call_id == call_id
    return event if ours else None  # type: ignore[return-value]


def lacked_capability(settled: CallState | None) -> MCPError | None:
    """MCP's missing-capability error (-32021, `data.requiredCapabilities` naming each) for a call whose
    client asked its MCP caller for what the caller had not declared it answers; None for any other call.
    Meant for such a call's error end: the client, refused, could only fail it, so the caller hears why."""
    if settled is None or not settled.lacked:
        return None
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"Missing required client capability: the tool needs {', '.join(settled.lacked)}, not declared",
        data={"requiredCapabilities": {capability: {} for capability in settled.lacked}},
    )


def _ended(event: ToolResult, settled: CallState | None) -> mt.CallToolResult:
    refused = lacked_capability(settled) if event.is_error else None
    if refused is not None:
        raise refused
    return call_result(event, settled)


async def outcome(
    state: AppState, session_id: str, call_id: str, seq: int, subscription: Any, ctx: Any, relay: Relay
) -> mt.CallToolResult | mt.InputRequiredResult:
    """The call's result once it has one (read from the live feed, or from the log when the feed missed
    it), or what the caller is asked first (an `InputRequiredResult`, for a 2026-07-28 caller)."""
    progressed = 0
    while True:
        try:
            item = await asyncio.wait_for(subscription.get(), _CHECK_EVERY_S)
        except TimeoutError:
            item = None
        if item is Signal.DELETED or item is Signal.CLOSING:
            return error_result("the session was deleted" if item is Signal.DELETED else "the server is shutting down")
        if isinstance(item, bytes):
            event = _ours(item, call_id)
            if isinstance(event, ToolResult):
                return _ended(event, await state.broker.calls.state(session_id, call_id))
            if isinstance(event, ClientToolProgress):
                progressed += 1
                await _progress(ctx, event, progressed)
            elif isinstance(event, InputRequested):
                asked = await relay.asked(gather=True)
                if asked is not None:
                    return asked
            continue
        # A quiet spell or a lag: the record says whether the feed missed the call's end.
        ended = await _checked(state, session_id, call_id, seq, relay)
        if ended is not None:
            return ended


async def _checked(
    state: AppState, session_id: str, call_id: str, seq: int, relay: Relay
) -> mt.CallToolResult | mt.InputRequiredResult | None:
    """What the feed missed, as the record says: the call's end, or (for a caller that answers input
    requests) a request."""
    settled = await state.broker.calls.state(session_id, call_id)
    if settled is None:
        return error_result("the call is gone (its session was deleted)")
    if settled.settled:
        return _ended(await _logged_result(state, session_id, call_id, seq), settled)
    return await relay.asked(gather=False) if relay.asks else None


async def _progress(ctx: Any, event: ClientToolProgress, progressed: int) -> None:
    # A fraction is progress out of 1; without one, progress counts the reports. Sent only when the
    # caller asked for progress (a token on its request).
    fraction = event.fraction
    done, total = (fraction, 1.0) if fraction is not None else (float(progressed), None)
    await ctx.session.report_progress(done, total, event.message)


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
