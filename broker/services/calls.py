"""One call, acted on by the session's owner: cancel it while the run goes on; or a call that no run made
(an MCP client's), dispatched to the registration that serves the tool and followed to its outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from broker.core import Core
from broker.errors import translate_redis_errors
from broker.scripts.layouts import call_names
from broker.services.clients import CALL_STREAM_RETENTION_FACTOR
from common.codec import loads, new_call_id
from common.events import build as events
from common.events.catalogue import ToolResult
from common.events.read import UnknownEvent, decode
from common.policies import Policy

CANCELLED_TEXT = "the call was cancelled"
SETTLED = frozenset({"answered", "failed", "denied"})
# The extension field `from` of the events of a call no run made, and its record's `src`.
MCP_SOURCE = "mcp"


@dataclass(frozen=True, slots=True)
class CallState:
    """Where a call stands: its state (dispatched, acked, answered, failed, ...) and, once it failed, why."""

    state: str
    reason: str | None
    # What the MCP caller that made the call lacked for something its client asked of it
    # (broker/services/inputs.py note_missing): an error end of the call is answered as that.
    lacked: tuple[str, ...] = field(default=(), kw_only=True)

    @property
    def settled(self) -> bool:
        return self.state in SETTLED


@dataclass(frozen=True, slots=True)
class CallRecord(CallState):
    """A call's record as a front door reads it: its kind (client, server, none), the registration it
    went to, and the run and step that made it."""

    kind: str = ""
    client_id: str = ""
    run_id: str = ""
    step: int = 0


@dataclass(frozen=True, slots=True)
class CallTask(CallState):
    """An MCP client's call as its task reads it (api/mcp/tasks.py): when it was made and last changed
    (ms), the ids of its open input requests, and once settled the seq of its `tool_result`."""

    created_ms: int = 0
    updated_ms: int = 0
    open_inputs: tuple[str, ...] = ()
    result_seq: int = 0


@dataclass(frozen=True, slots=True)
class Dispatched:
    """What became of a call no run made: `dispatched` to its registration, `awaiting` a decision (`seq`
    is that of its `client_tool_dispatched` or its `approval_requested`), or `denied` by a decision
    remembered for the session (`denial` is its error `tool_result`, as logged)."""

    call_id: str
    outcome: Literal["dispatched", "awaiting", "denied"]
    seq: int
    denial: ToolResult | None = None


class Calls:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def cancel(self, session_id: str, call_id: str, message: str = "") -> str:
        """Fail one owed call at once (`run_gone`, detail `cancelled`) with an error result carrying
        `message`; the run goes on. Returns the `client_tool_failed` event ('' for a server call or one
        waiting for approval). NotFound for an unknown call, Conflict for a settled one."""
        keys = self._core.keys
        text = f"{CANCELLED_TEXT}: {message}" if message else CANCELLED_TEXT
        call, args = call_names(keys, session_id, call_id, "")
        (event,) = await self._core.scripts.run(
            "cancel_call",
            call,
            {**args, "text": text},
            partition=keys.session(session_id).partition,
        )
        return str(event)

    async def dispatch(
        self,
        session_id: str,
        client: tuple[str, str],
        tool: str,
        arguments: dict[str, Any],
        *,
        policy: Policy,
        name: str,
        timeout_ms: int = 0,
        heartbeat_ms: int = 0,
        on_leave: str = "",
        approval_timeout_ms: int = 0,
        asks: frozenset[str] = frozenset(),
        traceparent: str = "",
    ) -> Dispatched:
        """Send a call no run made to registration `client` (its id and name) under the agent's `policy`
        for the tool (`allow` or `require_approval`; the caller answers `deny` itself), as a step's call
        is: its ack and result deadlines, and the tool's own, apply (`on_leave` "wait": it waits for its
        client should the registration go); `require_approval` is decided by a decision remembered under
        the model-visible `name`, else waits for one (a deny once `approval_timeout_ms` passes, when
        given). `asks`: what the MCP caller declared it answers (`elicitation.form`, `elicitation.url`,
        `sampling`, `roots`), kept on the record for the input requests the call makes; `traceparent`: the
        call's span, sent with it to the client ('' untraced). NotFound when the session is gone or the
        registration does not serve `tool`; Conflict when the session's storage is full."""
        keys, settings = self._core.keys, self._core.settings
        s = keys.session(session_id)
        client_id, client_name = client
        call_id = f"mcp_{new_call_id().removeprefix('call_')}"
        dispatched = events.client_tool_dispatched(
            client_id, call_id, tool, arguments, source=MCP_SOURCE, traceparent=traceparent or None
        )
        approval = ""
        if policy != "allow":
            approval = events.approval_requested(call_id, f"client:{client_name}", tool, arguments, source=MCP_SOURCE)
        call, args = call_names(keys, session_id, call_id, client_id)
        outcome, data = await self._core.scripts.run(
            "dispatch_call",
            {**call, "client": s.client(client_id), "stream": s.client_calls(client_id)},
            {
                **args,
                "tool": tool,
                "event": dispatched,
                "ack_ms": settings.ack_timeout_ms,
                "retention_ms": settings.ack_timeout_ms * CALL_STREAM_RETENTION_FACTOR,
                "timeout_ms": timeout_ms or "",
                "heartbeat_ms": heartbeat_ms or "",
                "policy": policy,
                "name": name,
                "approval": approval,
                "on_leave": on_leave,
                "approval_timeout_ms": approval_timeout_ms if approval else "",
                "asks": ",".join(sorted(asks)),
            },
            partition=s.partition,
        )
        if outcome == "denied":
            denial = decode(data)
            if not isinstance(denial, ToolResult):
                raise UnknownEvent(f"a remembered denial is a {type(denial).__name__}, not a tool_result")
            return Dispatched(call_id, "denied", 0, denial)
        return Dispatched(call_id, outcome, int(data))

    async def state(self, session_id: str, call_id: str) -> CallState | None:
        """The call's state as its record says (None when there is no such call, or no longer)."""
        raw = await self._core.redis.hget(self._core.keys.session(session_id).calls, call_id)
        if raw is None:
            return None
        record = loads(raw)
        return CallState(str(record.get("state", "")), record.get("reason"), lacked=tuple(record.get("mc") or ()))

    async def record(self, session_id: str, call_id: str) -> CallRecord | None:
        """The call's record (None when there is no such call, or no longer)."""
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._core.keys.session(session_id).calls, call_id)
        if raw is None:
            return None
        record = loads(raw)
        return CallRecord(
            str(record.get("state", "")),
            record.get("reason"),
            str(record.get("kind", "")),
            str(record.get("client") or ""),
            str(record.get("run") or ""),
            int(record.get("step") or 0),
        )

    async def task(self, session_id: str, call_id: str) -> CallTask | None:
        """The record of a call an MCP client made, as its task reads it (None when there is no such call
        in the session, no longer, or it is a run's)."""
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._core.keys.session(session_id).calls, call_id)
        if raw is None:
            return None
        record = loads(raw)
        if record.get("src") != MCP_SOURCE:
            return None
        created = int(record.get("at") or 0)
        # The times the record keeps of its changes: the ack, a wait for its client, an input request
        # opened, the settling.
        changed = [int(record.get(field) or 0) for field in ("acked_ms", "ws", "pz", "fin")]
        return CallTask(
            str(record.get("state", "")),
            record.get("reason"),
            created,
            max([created, *changed]),
            tuple(str(i) for i in record.get("iro") or ()),
            int(record.get("rs") or 0),
            lacked=tuple(record.get("mc") or ()),
        )
