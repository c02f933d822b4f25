"""OpenTelemetry traces (the GenAI semantic conventions), or nothing at all when a process does not trace.

`Tracing` is built once per process (`Tracing.start`) and passed down. Off, it is a few attribute reads:
the SDK is never imported and no span object is made. On, spans go to the SDK's batch processor of the
process's own (`common.tracing.sdk`), batched and exported off the request path.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from common.jsonlog import pop_ids, push_ids
from common.tracing.ids import SpanRef
from common.tracing.settings import TracingSettings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from common.tracing.sdk import Backend, OpenSpan

__all__ = ["Span", "SpanRef", "Tracing", "TracingSettings"]

logger = logging.getLogger(__name__)

Attributes = Mapping[str, Any]
# A span event: its name, attributes and time (ns since the epoch; None: now).
SpanEvent = tuple[str, Attributes, int | None]


class Span:
    """A span being made; with tracing off, one shared instance that does nothing."""

    def __init__(self, backend: Backend | None = None, span: OpenSpan | None = None) -> None:
        self._backend = backend
        self._span = span

    @property
    def recording(self) -> bool:
        return self._span is not None

    @property
    def ref(self) -> SpanRef | None:
        return None if self._span is None else self._span.ref

    def set(self, attributes: Attributes) -> None:
        if self._span is not None:
            self._span.attributes.update((name, value) for name, value in attributes.items() if value is not None)

    def event(self, name: str, attributes: Attributes | None = None, at_ns: int | None = None) -> None:
        if self._backend is not None and self._span is not None:
            self._backend.events(self._span, [(name, attributes or {}, at_ns)])

    def fail(self, error_type: str, message: str = "") -> None:
        if self._backend is not None and self._span is not None:
            self._backend.fail(self._span, error_type, message)


_NO_SPAN = Span()


class Tracing:
    """The process's tracer, or none. `capture_content`: prompts, arguments and results may go on spans
    (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)."""

    def __init__(self, backend: Backend | None = None, *, capture_content: bool = False) -> None:
        self._backend = backend
        self.capture_content = capture_content and backend is not None

    @property
    def enabled(self) -> bool:
        return self._backend is not None

    @classmethod
    def start(cls, settings: TracingSettings, service: str) -> Tracing:
        """The process's tracing as `settings` say: off unless asked for, else spans to the OTLP endpoint."""
        if not settings.enabled:
            return cls()
        from common.tracing.sdk import Backend

        if settings.other_protocol:
            logger.warning("OTLP protocol %r is not carried; spans go over http/protobuf", settings.other_protocol)
        capture = settings.otel_instrumentation_genai_capture_message_content
        return cls(Backend.otlp(service), capture_content=capture)

    @classmethod
    def exporting_to(
        cls, exporter: SpanExporter, service: str, *, capture_content: bool = False, batched: bool = False
    ) -> Tracing:
        """Spans to `exporter` (an in-memory one in tests), each as it ends unless `batched`."""
        from common.tracing.sdk import Backend

        return cls(Backend.exporting_to(service, exporter, batched=batched), capture_content=capture_content)

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        parent: SpanRef | None,
        attributes: Attributes,
        *,
        kind: str = "internal",
        ids: tuple[int, int] | None = None,
        start_ns: int | None = None,
    ) -> Iterator[Span]:
        """A span current for the block (log lines inside carry its ids), ended when the block ends;
        `ids`: its trace and span ids, chosen (the trace's is taken from `parent` when there is one)."""
        backend = self._backend
        if backend is None:
            yield _NO_SPAN
            return
        made = backend.start(name, parent, kind, attributes, ids=ids, start_ns=start_ns)
        ref = made.ref
        token = push_ids(lambda: {"trace_id": f"{ref.trace_id:032x}", "span_id": f"{ref.span_id:016x}"})
        try:
            yield Span(backend, made)
        except BaseException as error:
            if not made.failed:
                backend.fail(made, type(error).__qualname__)
            raise
        finally:
            pop_ids(token)
            backend.end(made)

    def record(
        self,
        name: str,
        parent: SpanRef | None,
        attributes: Attributes,
        *,
        ids: tuple[int, int],
        start_ns: int,
        end_ns: int,
        events: Sequence[SpanEvent] = (),
        error_type: str = "",
    ) -> None:
        """A span whose work is over, made afterwards with the ids other spans already name as parent."""
        backend = self._backend
        if backend is None:
            return
        made = backend.start(name, parent, "internal", attributes, ids=ids, start_ns=start_ns)
        backend.events(made, events)
        if error_type:
            backend.fail(made, error_type)
        backend.end(made, end_ns)

    def flush(self) -> None:
        if self._backend is not None:
            self._backend.flush()

    def shutdown(self) -> None:
        """Export what is left (blocking: call it off the event loop)."""
        if self._backend is not None:
            self._backend.shutdown()
