"""Tracing off costs nothing (no SDK imported, no span made); the trace context read from a header; log
lines inside a span carry its ids."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from api.tracing import route_of
from common.jsonlog import JsonFormatter
from common.tracing import SpanRef, Tracing, TracingSettings
from common.tracing.ids import MAX_TRACEPARENT, call_span_id, run_span_id, run_trace_id

ROOT = Path(__file__).resolve().parents[2]
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def _clean_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith(("OTEL_", "SWITCHBOARD_TRAC"))}


# Each process, started and its app or worker made ready to serve, without tracing asked for. (redis-py
# imports the SDK's metrics package itself when the SDK is installed; its tracing is ours to leave out.)
@pytest.mark.parametrize(
    "program",
    [
        "import api.server; from api.app import create_app; from api.settings import ApiSettings; "
        "create_app(ApiSettings(), 'redis://127.0.0.1:1')",
        "import workers.worker; from common.tracing import Tracing, TracingSettings; "
        "Tracing.start(TracingSettings(), 'switchboard-worker')",
    ],
)
def test_untraced_processes_never_import_the_sdk(program: str) -> None:
    ours = ("opentelemetry.sdk.trace", "opentelemetry.exporter")
    check = f"{program}; import sys; print(sorted(m for m in sys.modules if m.startswith({ours!r})))"
    found = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True, cwd=ROOT, env=_clean_env()
    )
    assert found.stdout.strip().splitlines()[-1] == "[]", found.stdout


def test_tracing_is_on_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "SWITCHBOARD_TRAC")):
            monkeypatch.delenv(name)
    assert not TracingSettings().enabled
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert TracingSettings().enabled
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not TracingSettings().enabled
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    monkeypatch.setenv("SWITCHBOARD_TRACING", "true")
    assert TracingSettings().enabled
    assert not TracingSettings().otel_instrumentation_genai_capture_message_content
    assert TracingSettings().other_protocol == ""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    assert TracingSettings().other_protocol == ""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    assert TracingSettings().other_protocol == "grpc"


def test_untraced_spans_are_one_shared_nothing() -> None:
    tracing = Tracing()
    with tracing.span("chat m", None, {"a": 1}) as first, tracing.span("chat n", None, {}) as second:
        assert first is second
        assert not first.recording
        assert first.ref is None
        first.set({"b": 2})
        first.fail("x")
    tracing.record("x", None, {}, ids=(1, 1), start_ns=1, end_ns=2)
    assert not tracing.capture_content


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (f"00-{TRACE}-{SPAN}-01", SpanRef(int(TRACE, 16), int(SPAN, 16), True)),
        (f"00-{TRACE}-{SPAN}-00", SpanRef(int(TRACE, 16), int(SPAN, 16), False)),
        # A later version is read by its first four fields.
        (f"01-{TRACE}-{SPAN}-01-more", SpanRef(int(TRACE, 16), int(SPAN, 16), True)),
        (None, None),
        ("", None),
        (f"00-{TRACE}-{SPAN}-01-more", None),
        (f"ff-{TRACE}-{SPAN}-01", None),
        (f"00-{'0' * 32}-{SPAN}-01", None),
        (f"00-{TRACE}-{'0' * 16}-01", None),
        (f"00-{TRACE.upper()}-{SPAN}-01", None),
        (f"00-{TRACE}-{SPAN}", None),
        (f"01-{TRACE}-{SPAN}-01-" + "x" * MAX_TRACEPARENT, None),
    ],
)
def test_a_traceparent_is_read_as_the_w3c_spec_says(header: str | None, expected: SpanRef | None) -> None:
    assert SpanRef.parse(header) == expected
    if expected is not None:
        assert SpanRef.parse(expected.traceparent) == expected


def test_a_runs_and_a_calls_ids_are_the_same_in_every_process() -> None:
    assert run_trace_id("r1") == run_trace_id("r1") != run_trace_id("r2")
    assert 0 < run_trace_id("r1") < 2**128
    assert 0 < run_span_id("r1") < 2**64
    # A model's call ids are its own: the same id in two runs is two spans.
    assert call_span_id("r1", "call_1") != call_span_id("r2", "call_1")


def test_log_lines_inside_a_span_carry_its_ids() -> None:
    tracing = Tracing.exporting_to(InMemorySpanExporter(), "test")
    formatter = JsonFormatter()
    record = logging.makeLogRecord({"msg": "inside", "levelno": logging.INFO, "levelname": "INFO"})
    parent = SpanRef(int(TRACE, 16), int(SPAN, 16))
    with tracing.span("work", parent, {}) as span:
        line = formatter.format(record)
        ref = span.ref
    assert ref is not None
    assert f'"trace_id":"{TRACE}"' in line
    assert f'"span_id":"{ref.span_id:016x}"' in line
    assert '"trace_id"' not in formatter.format(record)


def test_request_spans_name_the_route_not_the_ids() -> None:
    path = "/v1/sessions/s1/clients/c1/calls/call/with/slash/ack"
    assert route_of("/v1/sessions/s1/events") == "/v1/sessions/{id}/events"
    assert route_of("/v1/sessions/s1/clients/c1/calls/abc/result") == "/v1/sessions/{id}/clients/{id}/calls/{id}/result"
    assert route_of(path).startswith("/v1/sessions/{id}/clients/{id}/calls/{id}/")
    assert route_of("/v1/sessions") == "/v1/sessions"
