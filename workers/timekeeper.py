"""Turns a partition's due timers into what they stand for: a call past its deadline fails, a sign-in a
step waits on runs out, a lapsed registration leaves, a step whose worker stopped is given to another, a
debounce timer starts the queue, a deleted session's keys go, work taken but never begun goes to a live
worker, and a due schedule fires.

`Keeper` decides when to visit which partition; a visit reads what is due and arms the partition's alarm
in one script (`sweep.lua`), then runs the same idempotent script per member that any other path would,
so a member visited twice (two workers keeping a partition for a moment) is acted on once. Partitions
due at the same time are visited together (`visit_many`): their sweeps, their due schedules' records and
their firings each go as one pipeline per Redis node, which is what lets thousands of schedules due at
one instant fire within a second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker import Broker
from broker.run_spans import RunSpans
from broker.services.mcp_authorizations import sign_in_deadline
from broker.services.retention import TRIM_PREFIX
from broker.services.schedules import Fired
from broker.services.sessions import RETAIN_PREFIX
from broker.services.timers import Due
from broker.services.work import Entry

logger = logging.getLogger(__name__)

_BATCH = 500


class Timekeeper:
    def __init__(self, broker: Broker, consumer: str, run: Callable[[Entry], None], spans: RunSpans) -> None:
        self._broker = broker
        self._consumer = consumer
        self._run = run
        self._spans = spans

    async def visit(self, partition: int) -> int | None:
        """Act on what is due in `partition`; when its next timer is due (ms, Redis's clock), or None."""
        due = await self._broker.timers.sweep(partition, _BATCH)
        await self._act(partition, due)
        _raise_failed(await self._broker.schedules.fire(due.schedules))
        return due.next_due_ms

    async def visit_many(self, partitions: list[int]) -> dict[int, int | Exception | None]:
        """`visit` of several partitions due at once, each partition's answer or the error that failed its
        visit. What is due is read in one pipelined round trip per Redis node and the due schedules fired in
        two more (`fire_many`): thousands of schedules due at one instant fire in a few round trips, not
        three a partition."""
        broker = self._broker
        answers: dict[int, int | Exception | None] = {}
        swept: dict[int, Due] = {}
        for number, due in (await broker.timers.sweep_many(partitions, _BATCH)).items():
            if isinstance(due, Exception):
                answers[number] = due
            else:
                swept[number] = due
        # The firings first: they are what a burst is made of, and each is a run's input, owed at its time.
        fired = await broker.schedules.fire_many({number: due.schedules for number, due in swept.items()})
        acted = await asyncio.gather(*(self._act(number, due) for number, due in swept.items()), return_exceptions=True)
        for (number, due), outcome in zip(swept.items(), acted, strict=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome
            try:
                if outcome is not None:
                    raise outcome
                firing = fired.get(number, [])
                if isinstance(firing, Exception):
                    raise firing
                _raise_failed(firing)
            except Exception as error:
                answers[number] = error
            else:
                answers[number] = due.next_due_ms
        return answers

    async def _reclaim(self, session_id: str) -> None:
        ended = await self._broker.runs.reclaim(session_id)
        if ended is not None:
            # Its step's workers stopped too often: no worker is left to make the run's spans.
            await self._spans.finished(session_id, ended, "worker_stopped")

    async def _act(self, partition: int, due: Due) -> None:
        """Act on the partition's due members but its schedules."""
        broker = self._broker
        timers = broker.timers
        for session_id, call_id in due.deadlines:
            await self._deadline(session_id, call_id)
        for session_id, client_id in due.leases:
            await timers.lapse_client(session_id, client_id)
        for session_id in due.steps:
            await self._reclaim(session_id)
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

    async def _deadline(self, session_id: str, call_id: str) -> None:
        # A sign-in a waiting step needs runs out (a call whose id merely looks like one is a call's).
        authorization_id = sign_in_deadline(call_id)
        signs = self._broker.mcp_authorizations
        if authorization_id is not None and await signs.expire(session_id, authorization_id) != "unknown":
            return
        await self._broker.timers.expire_call(session_id, call_id)


def _raise_failed(fired: list[Fired | BaseException]) -> None:
    # One that failed is still due: the visit fails, so the keeper comes back to it (and backs off).
    for outcome in fired:
        if isinstance(outcome, BaseException):
            raise outcome
