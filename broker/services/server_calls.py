"""Server tool calls: a worker takes one, holds it under a lease while the tool runs, records its result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.core import Core
from broker.scripts.layouts import call_names
from common.codec import loads
from common.events import build as events


@dataclass(frozen=True, slots=True)
class ServerCall:
    tool: str
    arguments: dict[str, Any]
    source: str = ""
    """'' for the deployment's own tools, `mcp:<grant>` for an MCP server's."""
    parked: dict[str, Any] | None = None
    """What a grant's call parked with (`park`, `Inputs.ask_grant`): `task` (the server's task id), or `keys`,
    `ids` and `rs` (an input round: the server's keys, our request ids, its requestState); None at first."""
    left_s: float | None = None
    """The time left of the call's grant's timeout_s, kept since it was first parked (None before)."""


@dataclass(frozen=True, slots=True)
class TaskCancel:
    """A settled grant's call whose task at its server is owed a `tasks/cancel`."""

    source: str
    task_id: str


class ServerCalls:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def _script(self, name: str, session_id: str, call_id: str, **more: str | int) -> list[Any]:
        """Run a script of lib/call.lua's layout (acting for no client) with its own arguments `more`."""
        keys, args = call_names(self._core.keys, session_id, call_id, "")
        partition = self._core.keys.session(session_id).partition
        return await self._core.scripts.run(name, keys, {**args, **more}, partition=partition)

    async def begin(self, session_id: str, call_id: str, entry: str = "") -> ServerCall | TaskCancel | None:
        """Take a queued server call; None when it is not (any longer) this worker's to run, a TaskCancel
        when what is owed is its task's cancel at its server. `entry` is the work entry that brought it
        (done with here)."""
        lease = self._core.settings.server_call_lease_ms
        reply = await self._script("begin_server_call", session_id, call_id, lease_ms=lease, entry=entry)
        if reply[0] == "cancel":
            return TaskCancel(str(reply[1]), str(reply[2]))
        if reply[0] != "run":
            return None
        parked = loads(reply[4]) if reply[4] else None
        left_s = int(reply[5]) / 1000 if int(reply[5]) >= 0 else None
        return ServerCall(reply[1], loads(reply[2]), reply[3], parked, left_s)

    async def park(self, session_id: str, call_id: str, task_id: str, *, wake_s: float, left_s: float) -> bool:
        """Let go of a grant's call following task `task_id` until `wake_s` from now (its next poll), any
        worker then taking it up; `left_s` is the call's time left, kept the first time. False when the
        call is no longer this worker's (settled meanwhile)."""
        wake, left = max(1, round(wake_s * 1000)), max(0, round(left_s * 1000))
        (outcome,) = await self._script(
            "park_server_call", session_id, call_id, task=task_id, wake_ms=wake, left_ms=left
        )
        return bool(outcome == "parked")

    async def renew(self, session_id: str, call_id: str) -> bool:
        lease = self._core.settings.server_call_lease_ms
        (renewed,) = await self._script("renew_call", session_id, call_id, lease_ms=lease)
        return bool(int(renewed))

    async def result(self, session_id: str, call_id: str, text: str, *, is_error: bool) -> None:
        """Record the tool's result (and the next step owed, when it was the step's last call)."""
        await self.result_blocks(session_id, call_id, [events.text_block(text)], is_error=is_error)

    async def result_blocks(
        self,
        session_id: str,
        call_id: str,
        content: list[events.Block],
        *,
        is_error: bool,
        structured: dict[str, Any] | None = None,
    ) -> None:
        """The same, for a result of blocks (an MCP server's), `structured` its structuredContent."""
        result = events.tool_result_blocks(call_id, content, is_error=is_error, structured=structured)
        await self._script("server_result", session_id, call_id, event=result)

    async def progress(self, session_id: str, call_id: str, event: str) -> str:
        """Log a `tool_progress` event for a running call: 'logged', 'stale' (no longer running) or
        'full' (the session's storage is full: progress is not kept)."""
        (outcome,) = await self._script("server_progress", session_id, call_id, event=event)
        return str(outcome)
