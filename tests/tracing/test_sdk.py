"""The spans `common.tracing` hands the SDK's processor: the sampler the OTEL_* variables name is asked as
the SDK's tracer would ask it, the span limits hold, and a span's parent, kind and status are kept."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from common.tracing import SpanRef, Tracing

PARENT = SpanRef.parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
UNSAMPLED = SpanRef.parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")


def _tracing(exporter: InMemorySpanExporter) -> Tracing:
    return Tracing.exporting_to(exporter, "switchboard-test")


def test_a_span_keeps_its_parent_kind_attributes_and_failure() -> None:
    exporter = InMemorySpanExporter()
    tracing = _tracing(exporter)

    def failing() -> None:
        with tracing.span("POST /x", PARENT, {"a": "b", "gone": None}, kind="server") as span:
            span.set({"http.response.status_code": 500, "list": ["stop"]})
            span.event("client_tool_acked", {"switchboard.client_id": "c"})
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        failing()
    (made,) = exporter.get_finished_spans()
    assert PARENT is not None
    assert made.parent is not None
    assert made.context is not None
    assert (made.context.trace_id, made.parent.span_id) == (PARENT.trace_id, PARENT.span_id)
    assert made.parent.is_remote
    assert made.kind is SpanKind.SERVER
    assert dict(made.attributes or {}) == {
        "a": "b",
        "http.response.status_code": 500,
        "list": ("stop",),
        "error.type": "RuntimeError",
    }
    assert made.status.status_code is StatusCode.ERROR
    assert [event.name for event in made.events] == ["client_tool_acked"]
    assert made.end_time is not None
    assert made.start_time is not None
    assert made.end_time >= made.start_time


def test_a_parent_that_was_not_sampled_is_followed_by_the_default_sampler() -> None:
    exporter = InMemorySpanExporter()
    tracing = _tracing(exporter)
    with tracing.span("dropped", UNSAMPLED, {}) as span:
        assert span.ref is not None
        assert not span.ref.sampled
    with tracing.span("kept", PARENT, {}) as span:
        assert span.ref is not None
        assert span.ref.sampled
    assert [made.name for made in exporter.get_finished_spans()] == ["kept"]


def test_the_sampler_the_environment_names_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    exporter = InMemorySpanExporter()
    tracing = _tracing(exporter)
    with tracing.span("root", None, {}) as span:
        assert span.ref is not None
        assert not span.ref.sampled
    tracing.record("made after", None, {}, ids=(5, 6), start_ns=1, end_ns=2)
    assert exporter.get_finished_spans() == ()


def test_the_span_limits_of_the_environment_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "2")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "4")
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "1")
    exporter = InMemorySpanExporter()
    events: list[tuple[str, dict[str, str], int | None]] = [("one", {}, None), ("two", {}, None)]
    _tracing(exporter).record(
        "r", None, {"a": "abcdefgh", "b": 1, "c": 2}, ids=(5, 6), start_ns=10, end_ns=5, events=events
    )
    (made,) = exporter.get_finished_spans()
    assert dict(made.attributes or {}) == {"a": "abcd", "b": 1}
    assert [event.name for event in made.events] == ["one"]
    assert made.context is not None
    assert (made.context.trace_id, made.context.span_id) == (5, 6)
    # An end before the start (clocks of two processes) is held at the start.
    assert (made.start_time, made.end_time) == (10, 10)
