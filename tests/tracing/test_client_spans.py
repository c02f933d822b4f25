"""`switchboard tools serve`'s member makes its own span of a call where its process traces with
OpenTelemetry (a tracer provider set): a child of the dispatched `traceparent`, current while the tool
runs, and the one the ack, progress and result carry. Without a provider the call's own is passed
through (tests/tracing/test_clients.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from common.tracing import SpanRef
from switchboard import tool_spans
from switchboard.settings import Settings
from switchboard.tool_member import Member, Target
from switchboard.typed_tools import Call, ToolError, typed_tool
from tests.api_client import of_type, run_over
from tests.js_clients import drive
from tests.tracing.spans import ids, named, parent_id, run_ended, spans_when, traced_api

pytestmark = pytest.mark.both_redis


@pytest.fixture
def client_exporter(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """The member's process traces: a provider of its own (the global one is the process's, and set once)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tool_spans, "configured_provider", lambda: provider)
    return exporter


@pytest.mark.parametrize("fails", [False, True])
async def test_the_members_span_is_the_calls_child_and_the_answers_parent(
    settings: Settings, redis_url: str, api_key: str, client_exporter: InMemorySpanExporter, fails: bool
) -> None:
    exporter = InMemorySpanExporter()
    handed: list[str | None] = []
    current: list[int] = []

    async def look(call: Call) -> str:
        """Looks."""
        handed.append(call.traceparent)
        current.append(trace.get_current_span().get_span_context().span_id)
        call.progress("looking", 0.5)
        if fails:
            raise ToolError("nothing to see")
        return "seen"

    tool = typed_tool(look)
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session()
        registered = await api.register(session, name="pool", tools=[tool.declaration()])
        member = Member(Target(api.stack.url, session.id, session.token, registered["id"]), {tool.name: tool}, 1)
        stop = asyncio.Event()
        serving = asyncio.create_task(member.serve(stop))
        try:
            await api.send(session, "/call client__pool__look")
            events = await api.wait_for(session, run_over, timeout=10)
            spans = await spans_when(exporter, run_ended)
        finally:
            stop.set()
            await asyncio.wait_for(serving, 10)
    (dispatched,) = of_type(events, "client_tool_dispatched")
    call_span = SpanRef.parse(str(dispatched["traceparent"]))
    assert call_span is not None
    (mine,) = client_exporter.get_finished_spans()
    assert mine.name == "execute_tool look"
    assert mine.context is not None
    assert mine.parent is not None
    assert (mine.context.trace_id, mine.parent.span_id) == (call_span.trace_id, call_span.span_id)
    assert dict(mine.attributes or {})["gen_ai.tool.call.id"] == dispatched["call_id"]
    # The tool ran inside it and was handed it.
    assert current == [mine.context.span_id]
    assert handed == [SpanRef(mine.context.trace_id, mine.context.span_id).traceparent]
    answers = [span for span in spans if span.name.endswith(("/ack", "/progress", "/result"))]
    assert sorted(span.name.rsplit("/", 1)[1] for span in answers) == ["ack", "progress", "result"]
    assert {parent_id(span) for span in answers} == {mine.context.span_id}
    (tool_span,) = named(spans, "execute_tool")
    assert ids(tool_span) == (call_span.trace_id, call_span.span_id)
    if fails:
        assert dict(mine.attributes or {})["error.type"] == "tool_error"
        assert mine.status.status_code is StatusCode.ERROR
    else:
        assert mine.status.status_code is StatusCode.UNSET


def test_a_process_with_no_provider_makes_no_span_and_imports_nothing() -> None:
    script = textwrap.dedent(
        """
        import sys
        from switchboard import tool_spans
        with tool_spans.client_span("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "t", "c") as span:
            assert span.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        assert "opentelemetry.trace" not in sys.modules, "imported"
        from opentelemetry import trace
        assert tool_spans.configured_provider() is None
        from opentelemetry.sdk.trace import TracerProvider
        trace.set_tracer_provider(TracerProvider())
        assert tool_spans.configured_provider() is not None
        with tool_spans.client_span("not-a-traceparent", "t", "c") as span:
            assert span.traceparent and span.traceparent.startswith("00-")
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("fails", [False, True])
async def test_the_browser_sdks_trace_hook_makes_the_span_the_answers_carry(
    settings: Settings, redis_url: str, api_key: str, fails: bool
) -> None:
    exporter = InMemorySpanExporter()
    span_id = "00f067aa0ba902b7"
    roomy = settings.model_copy(update={"ack_timeout_s": 10.0, "result_timeout_s": 10.0})
    async with traced_api(roomy, redis_url, api_key, exporter) as api:
        session = await api.session()
        plan = {"url": api.stack.url, "sessionId": session.id, "token": session.token, "spanId": span_id}
        driving = asyncio.create_task(drive("sdk_trace_hook_driver.mjs", plan | {"fails": fails}))
        await api.wait_for(session, lambda es: bool(of_type(es, "client_registered")), timeout=30)
        await api.send(session, "/call client__web__look")
        (seen,) = await driving
        events = await api.wait_for(session, run_over)
        spans = await spans_when(exporter, run_ended)
    (dispatched,) = of_type(events, "client_tool_dispatched")
    assert seen["hook"] == {"tool": "look", "callId": dispatched["call_id"], "traceparent": dispatched["traceparent"]}
    call_span = SpanRef.parse(str(dispatched["traceparent"]))
    assert call_span is not None
    mine = f"00-{call_span.trace_id:032x}-{span_id}-01"
    assert seen["handed"] == mine
    assert seen["ended"] == (["tool_error"] if fails else [None])
    answers = [span for span in spans if span.name.endswith(("/ack", "/progress", "/result"))]
    assert sorted(span.name.rsplit("/", 1)[1] for span in answers) == ["ack", "progress", "result"]
    assert {parent_id(span) for span in answers} == {int(span_id, 16)}


async def test_a_trace_hook_that_throws_passes_the_calls_traceparent_through(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    roomy = settings.model_copy(update={"ack_timeout_s": 10.0, "result_timeout_s": 10.0})
    async with traced_api(roomy, redis_url, api_key, exporter) as api:
        session = await api.session()
        plan = {"url": api.stack.url, "sessionId": session.id, "token": session.token, "spanId": "0" * 16}
        driving = asyncio.create_task(drive("sdk_trace_hook_driver.mjs", plan | {"broken": True}))
        await api.wait_for(session, lambda es: bool(of_type(es, "client_registered")), timeout=30)
        await api.send(session, "/call client__web__look")
        (seen,) = await driving
        events = await api.wait_for(session, run_over)
        spans = await spans_when(exporter, run_ended)
    (dispatched,) = of_type(events, "client_tool_dispatched")
    assert seen["handed"] == dispatched["traceparent"]
    assert seen["ended"] == []
    (tool_span,) = named(spans, "execute_tool")
    answers = [span for span in spans if span.name.endswith(("/ack", "/progress", "/result"))]
    assert {parent_id(span) for span in answers} == {ids(tool_span)[1]}
