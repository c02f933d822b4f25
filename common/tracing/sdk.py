"""The OpenTelemetry SDK side of `common.tracing`: imported only when a process traces."""

from __future__ import annotations

import contextlib
import contextvars
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from common.tracing.ids import SpanRef

Attributes = Mapping[str, Any]

_KINDS = {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}


class _ChosenIds(IdGenerator):
    """Random ids, except where the caller chose them: a run's and a call's spans have ids every process
    derives alike (common/tracing/ids.py), so the spans other processes made name them as parent."""

    def __init__(self) -> None:
        self._chosen: contextvars.ContextVar[tuple[int, int]] = contextvars.ContextVar("chosen_ids", default=(0, 0))
        # Ids, not secrets: the SDK's own generator draws them the same way.
        self._random = random.Random()

    @contextlib.contextmanager
    def chosen(self, trace_id: int, span_id: int) -> Iterator[None]:
        token = self._chosen.set((trace_id, span_id))
        try:
            yield
        finally:
            self._chosen.reset(token)

    def generate_span_id(self) -> int:
        return self._chosen.get()[1] or self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._chosen.get()[0] or self._random.getrandbits(128) or 1

    def is_trace_id_random(self) -> bool:
        return False


def _parent(ref: SpanRef | None) -> Any:
    if ref is None:
        # Not the ambient span: a span of ours with no parent of ours starts a trace (or takes the one chosen).
        return trace.set_span_in_context(trace.INVALID_SPAN)
    flags = TraceFlags(TraceFlags.SAMPLED if ref.sampled else TraceFlags.DEFAULT)
    return trace.set_span_in_context(NonRecordingSpan(SpanContext(ref.trace_id, ref.span_id, True, flags)))


class Backend:
    """A tracer provider of the process's own (not the global one: it is passed down), its spans batched
    and exported off the request path."""

    def __init__(self, service: str, processor: SpanProcessor) -> None:
        self._ids = _ChosenIds()
        # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, read by Resource.create, win over our default name.
        resource = Resource.create({})
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: service}))
        self._provider = TracerProvider(resource=resource, id_generator=self._ids)
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer("switchboard")

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
    ) -> Any:
        with self._ids.chosen(*ids) if ids else contextlib.nullcontext():
            return self._tracer.start_span(
                name, _parent(parent), _KINDS[kind], dict(attributes), start_time=start_ns, record_exception=False
            )

    @staticmethod
    def current(span: Any) -> contextlib.AbstractContextManager[Any]:
        return trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    @staticmethod
    def ref(span: Any) -> SpanRef:
        context = span.get_span_context()
        return SpanRef(context.trace_id, context.span_id, context.trace_flags.sampled)

    @staticmethod
    def fail(span: Any, error_type: str, message: str = "") -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, message or None))

    @staticmethod
    def events(span: Any, events: Sequence[tuple[str, Attributes, int | None]]) -> None:
        for name, attributes, at_ns in events:
            span.add_event(name, dict(attributes), timestamp=at_ns)

    def flush(self) -> None:
        self._provider.force_flush()

    def shutdown(self) -> None:
        self._provider.shutdown()
