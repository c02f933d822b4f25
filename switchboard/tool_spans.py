"""The tool member's own span of a call, where this process traces with OpenTelemetry.

Optional: nothing here needs the `opentelemetry-api` package. When it is importable and a tracer provider
was configured (`opentelemetry.trace.set_tracer_provider`, or `opentelemetry-instrument`), each call a
member runs gets an `execute_tool {tool}` span that is a child of the call's dispatched `traceparent` and
is current while the tool runs (the tool's own spans nest under it); the call's ack, progress and result
carry that span's `traceparent`, so the deployment's request spans for them are its children. Otherwise
the dispatched `traceparent` is passed through, as before."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any


class ClientSpan:
    """What a call's answers carry (`traceparent`: the member's span, else the call's), and its outcome."""

    def __init__(self, traceparent: str | None, span: Any = None) -> None:
        self.traceparent = traceparent
        self._span = span

    def fail(self, error_type: str) -> None:
        if self._span is not None:
            from opentelemetry.trace import StatusCode

            self._span.set_attribute("error.type", error_type)
            self._span.set_status(StatusCode.ERROR)


def configured_provider() -> Any:
    """The process's tracer provider, or None when OpenTelemetry is not installed or none was set."""
    # A provider is set through opentelemetry.trace, so a process that set one has imported it: nothing is
    # imported here for a process that did not.
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    # The API's default stands in until a provider is set; until then it makes no spans.
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


@contextlib.contextmanager
def client_span(traceparent: str | None, tool: str, call_id: str) -> Iterator[ClientSpan]:
    """The member's span of one call for the block, or the call's own traceparent passed through."""
    provider = configured_provider()
    if provider is None:
        yield ClientSpan(traceparent)
        return
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    propagator = TraceContextTextMapPropagator()
    # A traceparent that is not one is dropped by the propagator: the span then starts a trace of its own.
    parent = propagator.extract({"traceparent": traceparent} if traceparent else {})
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id}
    tracer = provider.get_tracer("switchboard.tools")
    with tracer.start_as_current_span(f"execute_tool {tool}", context=parent, attributes=attributes) as span:
        carrier: dict[str, str] = {}
        propagator.inject(carrier, context=trace.set_span_in_context(span))
        yield ClientSpan(carrier.get("traceparent") or traceparent, span)
