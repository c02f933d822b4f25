"""Turns a partition's due timers into what they stand for: a call past its deadline fails, a lapsed
registration leaves, a step whose worker stopped is given to another, a debounce timer starts the queue,
a deleted session's keys go, work taken but never begun goes to a live worker, and a due schedule fires.

`Keeper` decides when to visit which partition; a visit reads what is due and arms the partition's alarm
in one script (`sweep.lua`), then runs the same idempotent script per member that any other path would,
so a member visited twice (two workers keeping a partition for a moment) is acted on once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker import Broker
from broker.services.retention import TRIM_PREFIX
from broker.services.sessions import RETAIN_PREFIX
from broker.services.work import Entry

logger = logging.getLogger(__name__)

_BATCH = 500


class Timekeeper:
    def __init__(self, broker: Broker, consumer: str, run: Callable[[Entry], None]) -> None:
        self._broker = broker
        self._consumer = consumer
        self._run = run

    async def visit(self, partition: int) -> int | None:
        """Act on what is due in `partition`; when its next timer is due (ms, Redis's clock), or None."""
        broker = self._broker
        timers = broker.timers
        due = await timers.sweep(partition, _BATCH)
        for session_id, call_id in due.deadlines:
            await timers.expire_call(session_id, call_id)
        for session_id, client_id in due.leases:
            await timers.lapse_client(session_id, client_id)
        for session_id in due.steps:
            await broker.runs.reclaim(session_id)
        for session_id in due.dequeue:
            await broker.runs.dequeue(session_id)
        for member in due.purges:
            if member.startswith(RETAIN_PREFIX):
                await broker.sessions.retain(member.removeprefix(RETAIN_PREFIX))
            elif member.startswith(TRIM_PREFIX):
                await broker.retention.trim(member.removeprefix(TRIM_PREFIX))
            else:
                await broker.sessions.purge(member)
        for entry_id in due.claims:
            entry = await broker.work.claim(partition, self._consumer, entry_id)
            if entry is not None:
                logger.info("took over work entry %s of partition %d, never begun by its worker", entry_id, partition)
                self._run(entry)
        await self._fire(due.schedules)
        return due.next_due_ms

    async def _fire(self, schedules: list[tuple[str, str]]) -> None:
        if not schedules:
            return
        fired = await self._broker.schedules.fire(schedules)
        # One that failed is still due: the visit fails, so the keeper comes back to it (and backs off).
        for outcome in fired:
            if isinstance(outcome, BaseException):
                raise outcome
