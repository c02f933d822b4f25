"""A run's spans made from what Redis keeps of it (the GenAI semantic conventions): `execute_tool
{name}` for each call of a step once it settled, built from the session's log (which every process that
touched the call wrote to), and `invoke_agent {agent}` when the run ends, whichever process ends it.

The run's span and each call's span have ids every process derives alike (common/tracing/ids.py), so the
chat spans, the client's own spans and the API's request spans name them as parent before they are made.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from broker.errors import SwitchboardError
from broker.services.traces import RunTrace
from common.codec import dumps
from common.events.catalogue import (
    AnyEvent,
    ApprovalRequested,
    ApprovalResolved,
    ClientToolDispatched,
    ClientToolFailed,
    RunCancelled,
    RunFailed,
    ToolResult,
)
from common.events.read import decode_known
from common.tracing import SpanRef, Tracing
from common.tracing.ids import call_span_id, run_span_id, run_trace_id

if TYPE_CHECKING:
    from broker.broker import Broker

# The log read for a step's calls is bounded: a step's calls and their events are far fewer than this.
_LOG_PAGE = 200
_LOG_PAGES = 10
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


def _ns(created_at: str) -> int:
    moment = datetime.fromisoformat(created_at)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


@dataclass(frozen=True, slots=True)
class TracedRun:
    """A run's place in its trace: `parent` the caller's span (None: the run starts a trace), `ref` the
    run's own span."""

    session_id: str
    run_id: str
    run: RunTrace
    parent: SpanRef | None
    ref: SpanRef

    @classmethod
    def of(cls, session_id: str, run_id: str, run: RunTrace) -> TracedRun:
        parent = SpanRef.parse(run.parent)
        trace_id = parent.trace_id if parent is not None else run_trace_id(run_id)
        return cls(session_id, run_id, run, parent, SpanRef(trace_id, run_span_id(run_id)))


class RunSpans:
    """Makes a run's spans once their work is over; nothing when tracing is off."""

    def __init__(self, tracing: Tracing, broker: Broker[Any]) -> None:
        self.tracing = tracing
        self._broker = broker

    async def finished(self, session_id: str, run_id: str, error_type: str = "") -> None:
        """A run ended where no step was committed (a cancel of a run that waited, a cancel or the step
        limit found as a step began, its step's workers stopping too often): its last step's calls' spans
        and its own, failed with `error_type` or else as the log says it ended."""
        if not self.tracing.enabled:
            return
        traced = TracedRun.of(session_id, run_id, await self._broker.traces.step(session_id, run_id, time.time_ns()))
        outcome = await self.tool_spans(traced)
        await self.run_span(traced, traced.run, error_type or outcome)

    async def deleted(self, session_id: str, agent_id: str | None, run_id: str) -> None:
        """The session was deleted while `run_id` was active: the run's span (`session_deleted`); its
        calls' spans are not made, the log they are read from being gone."""
        if not self.tracing.enabled:
            return
        # The session is gone whatever becomes of its run's span: a deletion does not fail for want of one.
        with contextlib.suppress(SwitchboardError):
            now = time.time_ns()
            traced = TracedRun.of(session_id, run_id, await self._broker.traces.step(session_id, run_id, now))
            await self.run_span(traced, traced.run, "session_deleted", agent_id=agent_id or "")

    async def run_span(self, traced: TracedRun, run: RunTrace, error_type: str, *, agent_id: str = "") -> None:
        """The run's `invoke_agent` span (`error_type` '' when it completed); its context is let go.
        `agent_id`: the session's agent, when the session is gone."""
        agent_id, name = await self._agent(traced.session_id, agent_id)
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
            ids=(traced.ref.trace_id, traced.ref.span_id),
            start_ns=run.start_ns or time.time_ns(),
            end_ns=time.time_ns(),
            error_type=error_type,
        )
        await self._broker.traces.ended(traced.session_id, traced.run_id)

    async def _agent(self, session_id: str, agent_id: str = "") -> tuple[str, str]:
        """The session's agent's id and name ('' for what is gone: the span loses them, not the run)."""
        with contextlib.suppress(SwitchboardError):
            agent_id = agent_id or (await self._broker.sessions.get(session_id)).agent_id or ""
            with contextlib.suppress(SwitchboardError):
                return agent_id, (await self._broker.agents.get(agent_id)).name if agent_id else ""
            return agent_id, ""
        return "", ""

    async def tool_spans(self, traced: TracedRun) -> str:
        """The spans of the calls the run's last step committed (settled by now); the run's outcome as the
        log read says it ('' while it runs or completed, else `failed` or `cancelled`)."""
        outcome = ""
        calls = {str(call["id"]): call for call in traced.run.calls}
        seen: dict[str, list[AnyEvent]] = {call_id: [] for call_id in calls}
        after = traced.run.after_seq
        for _ in range(_LOG_PAGES):
            rows = await self._broker.log.after(traced.session_id, after, _LOG_PAGE)
            for seq, raw in rows:
                after = seq
                event = decode_known(raw)
                if isinstance(event, RunFailed | RunCancelled) and event.run_id == traced.run_id:
                    outcome = "failed" if isinstance(event, RunFailed) else "cancelled"
                call_id = getattr(event, "call_id", None)
                if event is not None and isinstance(call_id, str) and call_id in seen:
                    seen[call_id].append(event)
            if len(rows) < _LOG_PAGE:
                break
        for call_id, events in seen.items():
            self._tool_span(traced, calls[call_id], events)
        return outcome

    def _tool_span(self, traced: TracedRun, call: dict[str, Any], events: list[AnyEvent]) -> None:
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
        error_type, end_ns = "", _ns(events[-1].created_at)
        for event in events:
            kind, at_ns = event.__struct_config__.tag, _ns(event.created_at)
            if kind in _CALL_EVENTS:
                marks.append((str(kind), self._event_attributes(event), at_ns))
            if isinstance(event, ClientToolFailed):
                error_type = event.reason
            elif isinstance(event, ApprovalResolved) and event.decision == "deny":
                error_type = error_type or "denied"
            elif isinstance(event, ToolResult):
                end_ns = at_ns
                error_type = error_type or ("tool_error" if event.is_error else "")
                if self.tracing.capture_content:
                    attributes["gen_ai.tool.call.result"] = msgspec.json.encode(event.content).decode()
            if isinstance(event, ClientToolDispatched | ApprovalRequested) and self.tracing.capture_content:
                attributes.setdefault("gen_ai.tool.call.arguments", dumps(event.arguments))
        self.tracing.record(
            f"execute_tool {name}",
            traced.ref,
            attributes,
            ids=(traced.ref.trace_id, call_span_id(traced.run_id, call_id)),
            start_ns=_ns(events[0].created_at),
            end_ns=end_ns,
            events=marks,
            error_type=error_type,
        )

    def _event_attributes(self, event: AnyEvent) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name in ("client_id", "request_id", "decision", "fraction", "reason"):
            value = getattr(event, name, None)
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                found[f"switchboard.{name}"] = value
        message = getattr(event, "message", None)
        if self.tracing.capture_content and isinstance(message, str):
            found["switchboard.message"] = message
        return found
