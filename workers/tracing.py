"""A run's spans as the worker makes them (the GenAI semantic conventions): `chat {model}` around each
model call, `execute_tool {name}` for each call of a step once it settled (built from the session's log,
which every process that touched the call wrote to), and `invoke_agent {agent}` when the run ends.

The run's span and each call's span have ids every process derives alike (common/tracing/ids.py), so the
chat spans, the client's own spans and the API's request spans name them as parent before they are made.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from broker import Broker
from broker.errors import SwitchboardError
from broker.services.runs import PlannedCall, Route
from broker.services.traces import RunTrace
from common.codec import dumps, loads
from common.tracing import Span, SpanRef, Tracing
from common.tracing.ids import call_span_id, run_span_id, run_trace_id
from workers.config import RunConfig
from workers.models.base import DeltaSink, Turn

# The log read for a step's calls is bounded: a step's calls and their events are far fewer than this.
_LOG_PAGE = 200
_LOG_PAGES = 10
# gen_ai.provider.name by provider format (the conventions' well-known values).
_PROVIDERS = {"anthropic": "anthropic", "openai_responses": "openai", "openai_chat": "openai", "gemini": "gcp.gemini"}
# The log's events about a call, made span events of its execute_tool span under their own names.
_CALL_EVENTS = frozenset(
    {
        "client_tool_dispatched",
        "client_tool_acked",
        "client_tool_progress",
        "client_tool_waiting",
        "tool_progress",
        "input_requested",
        "input_provided",
        "approval_requested",
        "approval_resolved",
    }
)


def provider_name(config: RunConfig, scripted: bool) -> str:
    return "switchboard.scripted" if scripted else _PROVIDERS.get(config.format, config.format)


def tool_type(route: Route) -> str:
    """gen_ai.tool.type: `extension` for a client's tool, `function` for a server tool, the grant for an
    MCP server's."""
    if route.kind == "client":
        return "extension"
    if route.source.startswith("mcp:"):
        return route.source.removeprefix("mcp:")
    return "function"


def _ns(created_at: str) -> int:
    moment = datetime.fromisoformat(created_at)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


@dataclass(frozen=True, slots=True)
class StepTrace:
    """The trace context a step works in."""

    session_id: str
    run_id: str
    step: int
    run: RunTrace
    parent: SpanRef | None
    run_ref: SpanRef


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

    async def began(self, session_id: str, run_id: str, step: int) -> StepTrace | None:
        """A step began: the run's context, after the spans of the last step's calls (settled, or this
        step would not run)."""
        if not self.tracing.enabled:
            return None
        run = await self._broker.traces.step(session_id, run_id, time.time_ns())
        parent = SpanRef.parse(run.parent)
        trace_id = parent.trace_id if parent is not None else run_trace_id(run_id)
        traced = StepTrace(session_id, run_id, step, run, parent, SpanRef(trace_id, run_span_id(run_id)))
        if run.calls:
            await self._tool_spans(traced)
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
                # The adapters end a turn with calls when the model asked for tools, else with its answer.
                "gen_ai.response.finish_reasons": ["tool_call" if turn.calls else "stop"],
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
        if traced is None:
            return
        noted = [{"id": call.call_id, "name": call.name, "type": tool_type(route)} for call, route in calls]
        run = await self._broker.traces.committed(traced.session_id, traced.run_id, noted, after_seq, usage)
        if outcome in ("completed", "failed", "cancelled"):
            await self._run_span(traced, run, "" if outcome == "completed" else outcome)

    async def ended(self, traced: StepTrace | None, outcome: str) -> None:
        """The worker ended the run (`run_failed`, `run_cancelled`) instead of committing the step."""
        if traced is not None:
            run = await self._broker.traces.step(traced.session_id, traced.run_id, time.time_ns())
            await self._run_span(traced, run, outcome.removeprefix("run_"))

    async def _run_span(self, traced: StepTrace, run: RunTrace, error_type: str) -> None:
        agent_id, name = await self._agent(traced.session_id)
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": agent_id,
            "gen_ai.agent.name": name,
            "gen_ai.conversation.id": traced.session_id,
            "switchboard.run.id": traced.run_id,
            "gen_ai.usage.input_tokens": run.usage.get("input_tokens"),
            "gen_ai.usage.output_tokens": run.usage.get("output_tokens"),
            "gen_ai.usage.cache_read.input_tokens": run.usage.get("cached_input_tokens"),
            "gen_ai.usage.reasoning.output_tokens": run.usage.get("reasoning_tokens"),
        }
        self.tracing.record(
            f"invoke_agent {name}" if name else "invoke_agent",
            traced.parent,
            {key: value for key, value in attributes.items() if value is not None},
            ids=(traced.run_ref.trace_id, traced.run_ref.span_id),
            start_ns=run.start_ns or time.time_ns(),
            end_ns=time.time_ns(),
            error_type=error_type,
        )
        await self._broker.traces.ended(traced.session_id, traced.run_id)

    async def _agent(self, session_id: str) -> tuple[str, str]:
        """The session's agent's id and name ('' for what is gone: the span loses them, not the run)."""
        with contextlib.suppress(SwitchboardError):
            agent_id = (await self._broker.sessions.get(session_id)).agent_id
            with contextlib.suppress(SwitchboardError):
                return agent_id, (await self._broker.agents.get(agent_id)).name
            return agent_id, ""
        return "", ""

    async def _tool_spans(self, traced: StepTrace) -> None:
        calls = {str(call["id"]): call for call in traced.run.calls}
        seen: dict[str, list[dict[str, Any]]] = {call_id: [] for call_id in calls}
        after = traced.run.after_seq
        for _ in range(_LOG_PAGES):
            rows = await self._broker.log.after(traced.session_id, after, _LOG_PAGE)
            for seq, raw in rows:
                after = seq
                event = loads(raw)
                call_id = event.get("call_id")
                if isinstance(call_id, str) and call_id in seen:
                    seen[call_id].append(event)
            if len(rows) < _LOG_PAGE:
                break
        for call_id, events in seen.items():
            self._tool_span(traced, calls[call_id], events)

    def _tool_span(self, traced: StepTrace, call: dict[str, Any], events: list[dict[str, Any]]) -> None:
        if not events:
            return
        name, call_id = str(call["name"]), str(call["id"])
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": str(call["type"]),
            "gen_ai.conversation.id": traced.session_id,
        }
        marks: list[tuple[str, dict[str, Any], int | None]] = []
        error_type, end_ns = "", _ns(events[-1]["created_at"])
        for event in events:
            kind, at_ns = event["type"], _ns(event["created_at"])
            if kind in _CALL_EVENTS:
                marks.append((kind, self._event_attributes(event), at_ns))
            if kind == "client_tool_failed":
                error_type = str(event.get("reason") or "failed")
            elif kind == "approval_resolved" and event.get("decision") == "deny":
                error_type = error_type or "denied"
            elif kind == "tool_result":
                end_ns = at_ns
                error_type = error_type or ("tool_error" if event.get("is_error") else "")
                if self.tracing.capture_content:
                    attributes["gen_ai.tool.call.result"] = dumps(event.get("content"))
            if kind in ("client_tool_dispatched", "approval_requested") and self.tracing.capture_content:
                attributes.setdefault("gen_ai.tool.call.arguments", dumps(event.get("arguments")))
        self.tracing.record(
            f"execute_tool {name}",
            traced.run_ref,
            attributes,
            ids=(traced.run_ref.trace_id, call_span_id(traced.run_id, call_id)),
            start_ns=_ns(events[0]["created_at"]),
            end_ns=end_ns,
            events=marks,
            error_type=error_type,
        )

    def _event_attributes(self, event: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name in ("client_id", "request_id", "decision", "fraction", "reason"):
            value = event.get(name)
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                found[f"switchboard.{name}"] = value
        if self.tracing.capture_content and isinstance(event.get("message"), str):
            found["switchboard.message"] = event["message"]
        return found
