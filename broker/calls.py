"""One call of a run, acted on by the session's owner: cancel it while the run goes on."""

from __future__ import annotations

from broker.core import Core
from broker.layouts import call_args, call_keys

CANCELLED_TEXT = "the call was cancelled"


class Calls:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def cancel(self, session_id: str, call_id: str, message: str = "") -> str:
        """Fail one owed call at once (`run_gone`, detail `cancelled`) with an error result carrying
        `message`; the run goes on. Returns the `client_tool_failed` event ('' for a server call or one
        waiting for approval). NotFound for an unknown call, Conflict for a settled one."""
        keys = self._core.keys
        text = f"{CANCELLED_TEXT}: {message}" if message else CANCELLED_TEXT
        (event,) = await self._core.scripts.run(
            "cancel_call",
            call_keys(keys, session_id),
            [*call_args(keys, session_id, call_id, ""), text],
            {"session": f"no session {session_id}", "call": f"no call {call_id} in this session"},
            partition=keys.session(session_id).partition,
        )
        return str(event)
