"""What carries a run's trace to the clients and back: the browser SDK and `switchboard tools serve` hand
their tool the call's span and answer inside it; an MCP grant's call carries it in `_meta`."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from switchboard.settings import Settings
from switchboard.typed_tools import Call
from tests.api_client import of_type, run_over
from tests.js_clients import drive
from tests.mcp_servers import Seen, serving
from tests.tracing.spans import (
    attrs,
    ids,
    member_call,
    named,
    parent_id,
    run_ended,
    spans_when,
    traced_api,
)

pytestmark = pytest.mark.both_redis


async def test_an_mcp_grants_call_carries_its_span_in_meta(settings: Settings, redis_url: str, api_key: str) -> None:
    exporter = InMemorySpanExporter()
    seen = Seen()
    async with serving("http", seen) as kit_url:
        private = settings.model_copy(update={"provider_allow_private": True})
        async with traced_api(private, redis_url, api_key, exporter) as api:
            session = await api.session(mcp=[{"name": "kit", "url": kit_url, "default_policy": "allow"}])
            await api.send(session, '/call mcp__kit__add {"a": 2, "b": 3}')
            await api.wait_for(session, run_over, timeout=20)
            spans = await spans_when(exporter, run_ended)
    (tool,) = named(spans, "execute_tool")
    assert attrs(tool)["gen_ai.tool.type"] == "kit"
    trace_id, span_id = ids(tool)
    assert [meta.get("traceparent") for meta in seen.metas] == [f"00-{trace_id:032x}-{span_id:016x}-01"]


async def test_tools_serve_hands_its_tool_the_calls_span_and_answers_inside_it(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    handed: list[str | None] = []

    async def look(call: Call) -> str:
        """Looks."""
        handed.append(call.traceparent)
        call.progress("looking", 0.5)
        return "seen"

    async with traced_api(settings, redis_url, api_key, exporter) as api:
        events, spans = await member_call(api, exporter, look)
    (dispatched,) = of_type(events, "client_tool_dispatched")
    assert handed == [dispatched["traceparent"]]
    (tool_span,) = named(spans, "execute_tool")
    answers = [span for span in spans if span.name.endswith(("/ack", "/progress", "/result"))]
    assert sorted(span.name.rsplit("/", 1)[1] for span in answers) == ["ack", "progress", "result"]
    assert {parent_id(span) for span in answers} == {ids(tool_span)[1]}
    assert [event.name for event in tool_span.events][:2] == ["client_tool_dispatched", "client_tool_acked"]


async def test_the_browser_sdk_hands_its_tool_the_calls_span_and_answers_inside_it(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    roomy = settings.model_copy(update={"ack_timeout_s": 10.0, "result_timeout_s": 10.0})
    async with traced_api(roomy, redis_url, api_key, exporter) as api:
        session = await api.session()
        plan = {"url": api.stack.url, "sessionId": session.id, "token": session.token}
        driving = asyncio.create_task(drive("sdk_trace_driver.mjs", plan))
        await api.wait_for(session, lambda es: bool(of_type(es, "client_registered")), timeout=30)
        await api.send(session, "/call client__web__look")
        lines = await driving
        events = await api.wait_for(session, run_over)
        spans = await spans_when(exporter, run_ended)
    (dispatched,) = of_type(events, "client_tool_dispatched")
    assert lines[0] == {"callId": dispatched["call_id"], "traceparent": dispatched["traceparent"]}
    (tool_span,) = named(spans, "execute_tool")
    answers = [span for span in spans if span.name.endswith(("/ack", "/progress", "/result"))]
    assert sorted(span.name.rsplit("/", 1)[1] for span in answers) == ["ack", "progress", "result"]
    assert {parent_id(span) for span in answers} == {ids(tool_span)[1]}
