"""What a long-lived deployment forgets on a schedule: the records of settled calls, and (once, after an
upgrade) the timers of sessions created before the timekeeper kept them.

A session's trim timer (`c|<session id>` in its partition's purge index, set at creation) comes due one
settled-call retention after the last trim. The trim reads the event log from where the last one stopped:
every `tool_result` there older than the retention names a settled call whose record can go (the log keeps
its events for as long as the session lives, so readers page them as before; a late answer to such a call
is told not_found instead of conflict).
"""

from __future__ import annotations

import logging

from broker.core import Core
from broker.errors import translate_redis_errors
from common.codec import now_ms, rfc3339_ms
from common.events.catalogue import ClientToolDispatched, ToolResult
from common.events.marks import of_type
from common.events.read import decode

logger = logging.getLogger(__name__)

TRIM_PREFIX = "c|"
# Events read per trim: a page of the log, so one busy session does not hold the timekeeper.
_PAGE = 200
# Registration call streams keep what a pool could still take (as at each dispatch: runs.py).
_STREAM_KEEP_ACK_TIMEOUTS = 2
# Set once every session of the workspace has its timers (arm_session_timers.lua).
_BACKFILL_DONE = b"1"


def _naming_a_call(data: bytes) -> ToolResult | ClientToolDispatched | None:
    """The event if it settles a call or names a registration's call stream; the others are not decoded."""
    if of_type(data, ToolResult) or of_type(data, ClientToolDispatched):
        event = decode(data)
        if isinstance(event, ToolResult | ClientToolDispatched):
            return event
    return None


class Retention:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def trim(self, session_id: str) -> str:
        """Forget the session's calls settled more than the retention ago: 'trimmed', or 'gone' when the
        session no longer lives."""
        core = self._core
        s = core.keys.session(session_id)
        keep_ms = core.settings.settled_call_retention_ms
        now = now_ms()
        with translate_redis_errors():
            after = int(await core.redis.hget(s.meta, "trimmed_seq") or 0)
            rows = await core.redis.xrange(s.events, min=f"{after + 1}-0", max="+", count=_PAGE)
        read_to, calls, clients = after, [], set()
        next_due = now + keep_ms
        for entry_id, fields in rows:
            event = _naming_a_call(fields[b"e"])
            if event is not None:
                settled_at = rfc3339_ms(event.created_at)
                if settled_at > now - keep_ms:
                    # The log is in time order: nothing from here on is old enough yet.
                    next_due = settled_at + keep_ms
                    break
                if isinstance(event, ToolResult):
                    calls.append(event.call_id)
                else:
                    clients.add(event.client_id)
            read_to = int(entry_id.split(b"-", 1)[0])
        else:
            if len(rows) == _PAGE:
                # More of the log is already old enough: come back at once.
                next_due = now
        minid = now - _STREAM_KEEP_ACK_TIMEOUTS * core.settings.ack_timeout_ms
        (outcome,) = await core.scripts.run(
            "trim_calls",
            {
                "meta": s.meta,
                "calls": s.calls,
                "inputs": s.inputs,
                "streams": [s.client_calls(cid) for cid in sorted(clients)],
            },
            {"sid": session_id, "read_to": read_to, "due": next_due, "minid": minid, "call_ids": calls},
            partition=s.partition,
        )
        return str(outcome)

    async def arm_every_session(self, batch: int = 500) -> int:
        """Give every session the timers a new one gets at creation (each only where missing), once per
        workspace: the sessions of a deployment older than those timers. How many sessions were visited
        (0 when this was done before)."""
        core = self._core
        keys, settings = core.keys, core.settings
        with translate_redis_errors():
            if await core.redis.get(keys.timers_armed) == _BACKFILL_DONE:
                return 0
        visited, after = 0, "-"
        while True:
            with translate_redis_errors():
                page = await core.redis.lex_range(keys.sessions, after, "+", batch)
            if not page:
                break
            for raw in page:
                session_id = raw.decode()
                s = keys.session(session_id)
                await core.scripts.run(
                    "arm_session_timers",
                    {"meta": s.meta},
                    {
                        "sid": session_id,
                        "retention_ms": settings.session_retention_ms,
                        "settled_ms": settings.settled_call_retention_ms,
                    },
                    partition=s.partition,
                )
                visited += 1
                after = f"({session_id}"
        with translate_redis_errors():
            await core.redis.set(keys.timers_armed, _BACKFILL_DONE)
        logger.info("gave %d sessions their retention and trim timers", visited)
        return visited
