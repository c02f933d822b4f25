"""Server tool calls: a worker takes one, holds it under a lease while the tool runs, records its result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker import events
from broker.codec import loads
from broker.core import Core
from broker.layouts import call_args, call_keys


@dataclass(frozen=True, slots=True)
class ServerCall:
    tool: str
    arguments: dict[str, Any]


class ServerCalls:
    def __init__(self, core: Core) -> None:
        self._core = core

    def _layout(self, session_id: str, call_id: str) -> tuple[list[str], list[str | int]]:
        keys = self._core.keys
        return call_keys(keys, session_id, call_id), call_args(keys, session_id, call_id, "")

    async def begin(self, session_id: str, call_id: str) -> ServerCall | None:
        """Take a queued server call; None when it is not (any longer) this worker's to run."""
        keys, args = self._layout(session_id, call_id)
        lease = self._core.settings.server_call_lease_ms
        reply = await self._core.scripts.run("begin_server_call", keys, [*args, lease])
        if reply[0] != "run":
            return None
        return ServerCall(reply[1], loads(reply[2]))

    async def renew(self, session_id: str, call_id: str) -> bool:
        keys, args = self._layout(session_id, call_id)
        claim = self._core.keys.arq_claim(self._core.keys.tool_job_id(session_id, call_id))
        lease = self._core.settings.server_call_lease_ms
        (renewed,) = await self._core.scripts.run("renew_call", [*keys, claim], [*args, lease])
        return bool(int(renewed))

    async def result(self, session_id: str, call_id: str, text: str, *, is_error: bool) -> list[str]:
        """Record the tool's result; the work owed (the next step, when it was the step's last call)."""
        keys, args = self._layout(session_id, call_id)
        _, owed = await self._core.scripts.run(
            "server_result", keys, [*args, events.tool_result(call_id, text, is_error=is_error)]
        )
        return list(owed)
