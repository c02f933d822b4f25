"""What a notable event's notice (`n|<sid>|<seq>` on its partition's work stream) is read as: the event as
stored, and what the session's record says of it (agent, subject, the run an approval's call belongs to)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from broker.core import Core
from broker.errors import translate_redis_errors


@dataclass(frozen=True, slots=True)
class NoticeSource:
    raw: bytes
    agent_id: str
    subject: str | None


class NoticeReader:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def read(self, session_id: str, seq: int) -> NoticeSource | None:
        """The event at `seq` and its session's agent and subject; None when either is gone (the session
        was deleted or purged)."""
        keys = self._core.keys.session(session_id)
        # One round trip: the log and the meta share the session's slot.
        with translate_redis_errors():
            async with self._core.redis.pipeline() as batch:
                batch.xrange(keys.events, min=f"{seq}-0", max=f"{seq}-0", count=1)
                batch.hmget(keys.meta, ["agent_id", "subject"])
                rows, (agent_id, subject) = await batch.execute()
        if not rows or agent_id is None:
            return None
        return NoticeSource(rows[0][1][b"e"], agent_id.decode(), subject.decode() if subject else None)

    async def run_of_call(self, session_id: str, call_id: str) -> str | None:
        """The run a call was made by (None: the call's record is gone, or no run made it)."""
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._core.keys.session(session_id).calls, call_id)
        if raw is None:
            return None
        run = json.loads(raw).get("run")
        return run if isinstance(run, str) and run else None
