"""An MCP caller's trace: a tools/call whose `params._meta.traceparent` names the caller's span (as the MCP
semantic conventions carry it) gets an `execute_tool {name}` span that is a child of it, and the call's
`client_tool_dispatched` carries that span, so the client's own span joins the caller's trace as a run's
call's does. Nothing when the deployment does not trace."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import mcp.types as mt

from common.tracing import Span, SpanRef, Tracing


def caller_span(meta: Mapping[str, Any] | None) -> SpanRef | None:
    """The caller's span from a request's `_meta` (None when absent or not a traceparent: the call is
    served, in a trace of its own)."""
    value = (meta or {}).get("traceparent")
    return SpanRef.parse(value) if isinstance(value, str) else None


@contextlib.contextmanager
def call_span(tracing: Tracing, params: mt.CallToolRequestParams, name: str, session_id: str) -> Iterator[Span]:
    """The span of a tools/call by the name the model calls the tool (`name`), ended with the block."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "extension",
        "gen_ai.conversation.id": session_id,
        "mcp.method.name": "tools/call",
    }
    parent = caller_span(params.meta) if tracing.enabled else None
    with tracing.span(f"execute_tool {name}", parent, attributes, kind="server") as span:
        yield span


def answered(span: Span, result: object) -> None:
    """What the call answered, on its span: a tool error is its `error.type`."""
    if isinstance(result, mt.CallToolResult) and result.is_error:
        span.fail("tool_error")
