"""The OpenTelemetry SDK side of `common.tracing`: imported only when a process traces.

A span is not made through the SDK's tracer: that costs about 35 µs a span on the request path (its
processor chain, a lock, the attributes cleaned on each set, the span made current), which the API pays
twice per client call (bench scenario 20). Instead a span under way is a few plain fields (`OpenSpan`),
the sampler the SDK would have asked deciding at its start; when it ends, one `ReadableSpan`, its attributes
and events bounded by the SDK's span limits (the `OTEL_SPAN_*` variables), goes to the batch processor,
which exports it off the request path. No span of ours is made current: every span names its parent
(common/tracing/ids.py), so nothing reads the ambient context.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, ParentBased
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)

from common.tracing.ids import SpanRef

Attributes = Mapping[str, Any]

_KINDS = {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}
_UNSET = Status(StatusCode.UNSET)
# The SDK's sampler unless OTEL_TRACES_SAMPLER names another: a span is kept when its parent was, a root always.
_DEFAULT_SAMPLER: str = ParentBased(ALWAYS_ON).get_description()  # type: ignore[no-untyped-call]


@dataclass(slots=True)
class OpenSpan:
    """A span under way: its ids, and what it will be exported with."""

    name: str
    ref: SpanRef
    parent: SpanRef | None
    kind: SpanKind
    start_ns: int
    attributes: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    status: Status = _UNSET

    @property
    def failed(self) -> bool:
        return "error.type" in self.attributes


def _bounded(attributes: Attributes, most: int | None, longest: int | None) -> dict[str, Any]:
    """`attributes` within the span limits: at most `most` of them, no text longer than `longest`, lists
    made tuples (as the SDK keeps them). Ours are already clean (text, numbers, lists of text; no None), so
    the SDK's per-value cleaning, a tenth of a span's cost, is not done."""
    kept: dict[str, Any] = {}
    for key, value in attributes.items():
        if most is not None and len(kept) >= most:
            break
        if isinstance(value, list):
            value = tuple(value)
        elif longest is not None and isinstance(value, str) and len(value) > longest:
            value = value[:longest]
        kept[key] = value
    return kept


def _context(ref: SpanRef, remote: bool) -> SpanContext:
    return SpanContext(ref.trace_id, ref.span_id, remote, TraceFlags(TraceFlags.SAMPLED if ref.sampled else 0))


class Backend:
    """The process's spans, batched and exported off the request path; the provider (not the global one:
    it is passed down) holds the resource, the sampler and the processor."""

    def __init__(self, service: str, processor: SpanProcessor) -> None:
        # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, read by Resource.create, win over our default name.
        resource = Resource.create({})
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: service}))
        self._provider = TracerProvider(resource=resource)
        self._provider.add_span_processor(processor)
        self._processor = processor
        self._resource = resource
        self._sampler = self._provider.sampler
        self._default_sampler = self._sampler.get_description() == _DEFAULT_SAMPLER
        self._limits = SpanLimits()
        self._scope = InstrumentationScope("switchboard")
        # Ids, not secrets: the SDK's own generator draws them the same way.
        self._random = random.Random()

    @classmethod
    def otlp(cls, service: str) -> Backend:
        """Spans exported over OTLP as the `OTEL_EXPORTER_OTLP_*` variables say (http/protobuf)."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return cls(service, BatchSpanProcessor(OTLPSpanExporter()))

    @classmethod
    def exporting_to(cls, service: str, exporter: SpanExporter, *, batched: bool) -> Backend:
        return cls(service, BatchSpanProcessor(exporter) if batched else SimpleSpanProcessor(exporter))

    def start(
        self,
        name: str,
        parent: SpanRef | None,
        kind: str,
        attributes: Attributes,
        *,
        ids: tuple[int, int] | None = None,
        start_ns: int | None = None,
    ) -> OpenSpan:
        """A span under way, a child of `parent` (None: it starts a trace, the one `ids` chose if given);
        `ids`: its trace and span ids (the trace's is the parent's when there is one)."""
        chosen_trace, chosen_span = ids or (0, 0)
        trace_id = parent.trace_id if parent is not None else chosen_trace or self._random.getrandbits(128) or 1
        span_id = chosen_span or self._random.getrandbits(64) or 1
        kept = {key: value for key, value in attributes.items() if value is not None}
        sampled = self._sampled(name, parent, trace_id, _KINDS[kind], kept)
        ref = SpanRef(trace_id, span_id, sampled)
        return OpenSpan(name, ref, parent, _KINDS[kind], start_ns or time.time_ns(), kept)

    def _sampled(self, name: str, parent: SpanRef | None, trace_id: int, kind: SpanKind, kept: dict[str, Any]) -> bool:
        """Whether the span is kept, asked as the SDK asks, at its start (its `sampled` flag is what its
        children are told); the default sampler's answer is known without asking: the parent's."""
        if self._default_sampler:
            return True if parent is None else parent.sampled
        context = None if parent is None else set_span_in_context(NonRecordingSpan(_context(parent, remote=True)))
        decision = self._sampler.should_sample(context, trace_id, name, kind, kept)
        kept.update(decision.attributes or {})
        return decision.decision is Decision.RECORD_AND_SAMPLE

    def end(self, span: OpenSpan, end_ns: int | None = None) -> None:
        """The span is over: exported unless the sampler dropped it."""
        if not span.ref.sampled:
            return
        limits = self._limits
        self._processor.on_end(
            ReadableSpan(
                span.name,
                _context(span.ref, remote=False),
                None if span.parent is None else _context(span.parent, remote=True),
                self._resource,
                _bounded(span.attributes, limits.max_span_attributes, limits.max_span_attribute_length),
                span.events[: limits.max_events],
                (),
                span.kind,
                None,
                span.status,
                span.start_ns,
                max(end_ns or time.time_ns(), span.start_ns),
                self._scope,
            )
        )

    def events(self, span: OpenSpan, events: Sequence[tuple[str, Attributes, int | None]]) -> None:
        limits = self._limits
        for name, attributes, at_ns in events:
            bounded = _bounded(attributes, limits.max_event_attributes, limits.max_attribute_length)
            span.events.append(Event(name, bounded, at_ns or time.time_ns()))

    @staticmethod
    def fail(span: OpenSpan, error_type: str, message: str = "") -> None:
        span.attributes["error.type"] = error_type
        span.status = Status(StatusCode.ERROR, message or None)

    def flush(self) -> None:
        self._provider.force_flush()

    def shutdown(self) -> None:
        self._provider.shutdown()
