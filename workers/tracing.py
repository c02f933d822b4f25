"""A run's spans as the worker makes them (the GenAI semantic conventions): `chat {model}` around each
model call; when a step begins, the `execute_tool` spans of the last step's calls (settled, or the step
would not run), and when the run ends, its `invoke_agent` span (both made by broker/run_spans.py)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

from broker import Broker
from broker.run_spans import RunSpans, TracedRun
from broker.services.runs import PlannedCall, Route
from common.codec import dumps
from common.tracing import Span, SpanRef, Tracing
from common.tracing.ids import call_span_id, run_trace_id
from workers.config import RunConfig
from workers.models.base import DeltaSink, Turn

# gen_ai.provider.name by provider format (the conventions' well-known values).
_PROVIDERS = {"anthropic": "anthropic", "openai_responses": "openai", "openai_chat": "openai", "gemini": "gcp.gemini"}


def provider_name(config: RunConfig, scripted: bool) -> str:
    return "switchboard.scripted" if scripted else _PROVIDERS.get(config.format, config.format)


# Providers' finish reasons, as the GenAI conventions' common values (the OpenAI ones); another is kept as
# the provider said it, in lower case.
_FINISH_REASONS = {
    # Anthropic Messages
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    # OpenAI Responses (an incomplete response's reason)
    "max_output_tokens": "length",
    # OpenAI Chat Completions
    "function_call": "tool_calls",
    # Gemini
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
}


def finish_reason(turn: Turn) -> str:
    """gen_ai.response.finish_reasons' one value for a turn: the provider's reason as a common value; a
    turn that stopped to call tools is `tool_calls` (Gemini and a completed Responses turn say `STOP` or
    nothing then); a provider that said nothing (the scripted model), from whether the model called tools."""
    said = turn.finish_reason
    reason = _FINISH_REASONS.get(said, said.lower()) if said else "stop"
    return "tool_calls" if reason == "stop" and turn.calls else reason


def tool_type(route: Route) -> str:
    """gen_ai.tool.type: `extension` for a client's tool, `function` for a server tool, the grant for an
    MCP server's."""
    if route.kind == "client":
        return "extension"
    if route.source.startswith("mcp:"):
        return route.source.removeprefix("mcp:")
    return "function"


async def call_traceparent(tracing: Tracing, broker: Broker, session_id: str, call_id: str) -> str:
    """A run's call's `execute_tool` span as a traceparent, for the MCP server it goes to ('' untraced, or
    for a call no run made)."""
    if not tracing.enabled:
        return ""
    record = await broker.calls.record(session_id, call_id)
    if record is None or not record.run_id:
        return ""
    parent = SpanRef.parse(await broker.traces.parent(session_id, record.run_id))
    trace_id = parent.trace_id if parent is not None else run_trace_id(record.run_id)
    return SpanRef(trace_id, call_span_id(record.run_id, call_id)).traceparent


@dataclass(frozen=True, slots=True)
class StepTrace:
    """The trace context a step works in."""

    run: TracedRun
    step: int

    @property
    def session_id(self) -> str:
        return self.run.session_id

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def run_ref(self) -> SpanRef:
        return self.run.ref


class FirstChunk:
    """A delta sink that notes when the model's first chunk came, and passes everything on."""

    def __init__(self, inner: DeltaSink) -> None:
        self._inner = inner
        self.at: float | None = None

    def _seen(self) -> None:
        if self.at is None:
            self.at = time.monotonic()

    def text(self, piece: str) -> None:
        self._seen()
        self._inner.text(piece)

    def reasoning(self, piece: str) -> None:
        self._seen()
        self._inner.reasoning(piece)

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        self._seen()
        self._inner.tool_input(index, call_id, name, piece)

    def restart(self) -> None:
        self._inner.restart()


class RunTracer:
    """The worker's spans of runs; every method returns at once when tracing is off."""

    def __init__(self, tracing: Tracing, broker: Broker) -> None:
        self.tracing = tracing
        self._broker = broker
        self._spans = RunSpans(tracing, broker)

    async def trace_id(self, session_id: str, run_id: str) -> str:
        """The run's trace id as 32 hex digits, for the events that carry it ('' untraced)."""
        if not self.tracing.enabled:
            return ""
        parent = SpanRef.parse(await self._broker.traces.parent(session_id, run_id))
        return f"{parent.trace_id if parent is not None else run_trace_id(run_id):032x}"

    async def ended_as_it_began(self, session_id: str, run_id: str, outcome: str) -> None:
        """A step found its run ended as it began (a cancel, the step limit): the run's spans."""
        if outcome == "ended":
            await self._spans.finished(session_id, run_id)

    async def began(self, session_id: str, run_id: str, step: int) -> StepTrace | None:
        """A step began: the run's context, after the spans of the last step's calls (settled, or this
        step would not run)."""
        if not self.tracing.enabled:
            return None
        run = await self._broker.traces.step(session_id, run_id, time.time_ns())
        traced = StepTrace(TracedRun.of(session_id, run_id, run), step)
        if run.calls:
            await self._spans.tool_spans(traced.run)
        return traced

    @contextlib.contextmanager
    def chat(self, traced: StepTrace | None, config: RunConfig, scripted: bool) -> Iterator[Span]:
        """The span of the step's model call."""
        if traced is None:
            with self.tracing.span("chat", None, {}) as span:
                yield span
            return
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(config, scripted),
            "gen_ai.request.model": config.model,
            "gen_ai.request.max_tokens": config.max_tokens,
            "gen_ai.conversation.id": traced.session_id,
            "switchboard.run.id": traced.run_id,
            "switchboard.step": traced.step,
        }
        with self.tracing.span(f"chat {config.model}", traced.run_ref, attributes, kind="client") as span:
            yield span

    def answered(self, span: Span, turn: Turn, started: float, first: FirstChunk | None) -> None:
        """What the model answered, on its chat span."""
        if not span.recording or first is None:
            return
        usage = turn.usage.fields() if turn.usage is not None else {}
        span.set(
            {
                "gen_ai.response.model": turn.model,
                "gen_ai.usage.input_tokens": usage.get("input_tokens"),
                "gen_ai.usage.output_tokens": usage.get("output_tokens"),
                "gen_ai.usage.cache_read.input_tokens": usage.get("cached_input_tokens"),
                "gen_ai.usage.reasoning.output_tokens": usage.get("reasoning_tokens"),
                "gen_ai.response.finish_reasons": [finish_reason(turn)],
                "gen_ai.response.time_to_first_chunk": None if first.at is None else first.at - started,
            }
        )
        if self.tracing.capture_content:
            span.set({"gen_ai.output.messages": dumps([{"role": "assistant", "parts": turn.content}])})

    @staticmethod
    def traceparents(traced: StepTrace | None, turn: Turn) -> dict[str, str] | None:
        """Each call's `execute_tool` span as a traceparent, by call id (None untraced)."""
        if traced is None:
            return None
        trace_id = traced.run_ref.trace_id
        return {
            call.call_id: SpanRef(trace_id, call_span_id(traced.run_id, call.call_id)).traceparent
            for call in turn.calls
        }

    async def committed(
        self,
        traced: StepTrace | None,
        calls: list[tuple[PlannedCall, Route]],
        after_seq: int,
        usage: dict[str, int],
        outcome: str,
    ) -> None:
        """The step committed: its calls kept for the next step's worker, and the run's span made if the
        run ended."""
        if traced is None or outcome == "stale":
            # A stale commit changed nothing: the try that holds the step notes its own calls.
            return
        noted = [{"id": call.call_id, "name": call.name, "type": tool_type(route)} for call, route in calls]
        run = await self._broker.traces.committed(traced.session_id, traced.run_id, noted, after_seq, usage)
        if outcome in ("completed", "failed", "cancelled"):
            await self._spans.run_span(traced.run, run, "" if outcome == "completed" else outcome)

    async def ended(self, traced: StepTrace | None, outcome: str) -> None:
        """The worker ended the run (`run_failed`, `run_cancelled`) instead of committing the step."""
        if traced is not None:
            run = await self._broker.traces.step(traced.session_id, traced.run_id, time.time_ns())
            await self._spans.run_span(traced.run, run, outcome.removeprefix("run_"))
