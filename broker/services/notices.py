"""What a notable event's notice (`n|<sid>|<seq>` on its partition's work stream) is read as: the event as
stored, and what the session's record says of it (agent, subject, the run an approval's call belongs to and
when its approval runs out)."""

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


@dataclass(frozen=True, slots=True)
class CallFacts:
    # The run that made the call; None when no run made it (an MCP client's).
    run_id: str | None
    # When the call's open approval resolves by itself as a deny (ms: its policy's approval_timeout_s);
    # None when it waits for ever or is no longer open (the decision drops it from the record).
    approval_deadline: int | None
    # When the call fails by its tool's own timeout_s (ms: counted from its ack), the one deadline an open
    # input request leaves running (lib/call.lua sb_pause_deadline); None without timeout_s or an ack.
    timeout_deadline: int | None = None


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

    async def call(self, session_id: str, call_id: str) -> CallFacts:
        """What a call's record says of its run and its deadlines (nothing, once it is gone)."""
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._core.keys.session(session_id).calls, call_id)
        if raw is None:
            return CallFacts(None, None)
        record = json.loads(raw)
        run = record.get("run")
        # `ato` (how long the approval may wait) is on the record only while the approval is open, and then
        # `expires` is when its timer comes due (lib/call.lua sb_approval_deadline).
        expires = record.get("expires") if record.get("ato") else None
        acked, timeout = record.get("acked_ms"), record.get("to")
        return CallFacts(
            run if isinstance(run, str) and run else None,
            int(expires) if isinstance(expires, int | float) else None,
            int(acked + timeout) if isinstance(acked, int | float) and isinstance(timeout, int | float) else None,
        )
