"""The session MCP server reads a tools/call's `params._meta.traceparent` (the MCP semantic conventions'
carrier): the call's `execute_tool` span is a child of the caller's span, and the client is dispatched
that span, so its ack and result are inside the caller's trace. A `_meta` that is no traceparent starts a
trace of its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from common.tracing import SpanRef
from switchboard.settings import Settings
from tests.api_client import Api, Session, of_type
from tests.helpers import HIGHLIGHT
from tests.tracing.spans import attrs, ids, named, parent_id, spans_when, traced_api

pytestmark = pytest.mark.both_redis

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TOOL = "client__web__highlight_row"


@contextlib.asynccontextmanager
async def mcp_client(api: Api, session: Session) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {session.token}"}, timeout=30) as http:
        transport = streamable_http_client(f"{api.stack.url}/v1/sessions/{session.id}/mcp", http_client=http)
        async with Client(transport, cache=None) as client:
            yield client


async def _called(api: Api, meta: dict[str, Any], *, error: bool = False) -> tuple[dict[str, Any], mt.CallToolResult]:
    """One tools/call with `meta`, answered by the registration: its dispatch and its result."""
    session = await api.session()
    web = await api.register(session, tools=[HIGHLIGHT])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool(TOOL, {"row_id": "7"}, meta=meta))  # type: ignore[arg-type]
        events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")), timeout=10)
        (dispatched,) = of_type(events, "client_tool_dispatched")
        path = f"/v1/sessions/{session.id}/clients/{web['id']}/calls/{dispatched['call_id']}"
        # The client answers inside the span it was dispatched, as the SDKs do.
        headers = {"traceparent": dispatched["traceparent"]} if "traceparent" in dispatched else {}
        answer = {"text": "no such row", "is_error": True} if error else {"text": "done"}
        async with api.as_session(session) as http:
            assert (await http.post(f"{path}/ack", headers=headers)).status_code == 200
            assert (await http.post(f"{path}/result", json=answer, headers=headers)).status_code == 204
        return dispatched, await asyncio.wait_for(calling, 10)


def _tool_span(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    (tool,) = named(spans, "execute_tool")
    return tool


async def test_a_call_is_a_child_of_the_span_in_its_meta(settings: Settings, redis_url: str, api_key: str) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        dispatched, result = await _called(api, {"traceparent": CALLER})
        spans = await spans_when(exporter, lambda found: bool(named(found, "execute_tool")) and len(found) >= 3)
    assert not result.is_error
    tool = _tool_span(spans)
    caller = SpanRef.parse(CALLER)
    assert caller is not None
    assert tool.name == f"execute_tool {TOOL}"
    assert (ids(tool)[0], parent_id(tool)) == (caller.trace_id, caller.span_id)
    assert attrs(tool)["gen_ai.tool.call.id"] == dispatched["call_id"]
    assert attrs(tool)["gen_ai.tool.name"] == TOOL
    assert dispatched["traceparent"] == SpanRef(*ids(tool)).traceparent
    answers = [span for span in spans if span.name.endswith(("/ack", "/result"))]
    assert sorted(span.name.rsplit("/", 1)[1] for span in answers) == ["ack", "result"]
    assert {parent_id(span) for span in answers} == {ids(tool)[1]}
    assert {ids(span)[0] for span in answers} == {caller.trace_id}


@pytest.mark.parametrize(
    "meta", [{}, {"traceparent": "not-a-traceparent"}, {"traceparent": 7}, {"traceparent": "x" * 300}]
)
async def test_a_meta_with_no_traceparent_starts_a_trace_of_its_own(
    settings: Settings, redis_url: str, api_key: str, meta: dict[str, Any]
) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        dispatched, result = await _called(api, meta)
        spans = await spans_when(exporter, lambda found: bool(named(found, "execute_tool")))
    assert not result.is_error
    tool = _tool_span(spans)
    assert tool.parent is None
    assert dispatched["traceparent"] == SpanRef(*ids(tool)).traceparent


async def test_a_tool_error_is_the_spans_error_type(settings: Settings, redis_url: str, api_key: str) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        _, result = await _called(api, {"traceparent": CALLER}, error=True)
        spans = await spans_when(exporter, lambda found: bool(named(found, "execute_tool")))
    assert result.is_error
    tool = _tool_span(spans)
    assert attrs(tool)["error.type"] == "tool_error"
    assert tool.status.status_code is StatusCode.ERROR


async def test_untraced_the_call_carries_no_traceparent(api: Api) -> None:
    dispatched, result = await _called(api, {"traceparent": CALLER})
    assert not result.is_error
    assert "traceparent" not in dispatched
