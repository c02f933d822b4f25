"""Schedules: input a session posts itself later, once (`at`) or by a cron expression in a time zone.

A schedule is a record in its session's schedules hash and a member `<sid>:<schedule id>` of its
partition's schedule index, scored by its next fire time (the one copy of it). The timekeeper finds a due
member there with the partition's other timers (sweep.lua) and fires it (`fire`): the next time is
computed here, from the cron expression and after now, so fires missed while no worker ran are caught up
by one firing; fire_schedule.lua posts the input and moves the schedule only if its fire time is still
the one read, so two workers (or one retried after a crash) fire a due time once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from broker.core import Core
from broker.errors import translate_redis_errors
from broker.scripts.layouts import run_names
from broker.scripts.runner import Args, Group, Keys
from common import codec
from common.codec import dumps, loads, uuid7
from common.schedules import next_fire_ms

# The most schedules a session holds.
MAX_SCHEDULES = 20


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as stored: `cron` or `at_ms` (the other None), its zone, text, next fire time (ms) and
    when it was created (ms)."""

    id: str
    cron: str | None
    at_ms: int | None
    timezone: str
    text: str
    next_fire_ms: int
    created_ms: int


@dataclass(frozen=True, slots=True)
class Fired:
    """What a firing did: `outcome` is fire_schedule.lua's ('new_run', 'steered', a policy's refusal,
    'stale', 'gone'); `due_ms` the fire time it acted on (None: nothing was due)."""

    outcome: str
    due_ms: int | None


def _record(schedule: Schedule) -> str:
    # The record never changes: the index's score is the next fire time.
    fields: dict[str, object] = {"id": schedule.id, "timezone": schedule.timezone, "text": schedule.text}
    if schedule.cron is not None:
        fields["cron"] = schedule.cron
    else:
        fields["at"] = schedule.at_ms
    fields["created_at"] = schedule.created_ms
    return dumps(fields)


def _schedule(raw: bytes | str, next_ms: int) -> Schedule:
    rec = loads(raw)
    at = rec.get("at")
    return Schedule(
        rec["id"],
        rec.get("cron"),
        None if at is None else int(at),
        rec["timezone"],
        rec["text"],
        next_ms,
        int(rec["created_at"]),
    )


def _fired(replies: list[list[Any] | Exception], due_times: list[int]) -> list[Fired | BaseException]:
    return [
        reply if isinstance(reply, Exception) else Fired(str(reply[0]), due_ms or None)
        for reply, due_ms in zip(replies, due_times, strict=True)
    ]


class Schedules:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def create(
        self,
        session_id: str,
        schedule_id: str,
        *,
        cron: str | None,
        at_ms: int | None,
        timezone: str,
        text: str,
        next_ms: int,
    ) -> Schedule:
        """Add the schedule (validated by the caller), first due at `next_ms`. The same id again (a
        retried request) adds nothing. Raises NotFound (no session), InvalidRequest (the session holds
        MAX_SCHEDULES), SessionFull."""
        s = self._core.keys.session(session_id)
        schedule = Schedule(schedule_id, cron, at_ms, timezone, text, next_ms, codec.now_ms())
        (outcome,) = await self._core.scripts.run(
            "create_schedule",
            {"meta": s.meta, "session_schedules": s.schedules},
            {
                "sid": session_id,
                "id": schedule_id,
                "record": _record(schedule),
                "next_ms": next_ms,
                "max": MAX_SCHEDULES,
            },
            partition=s.partition,
        )
        if outcome == "created":
            return schedule
        # A retry: the schedule as the first attempt made it (or fired and ended since).
        return (await self.get(session_id, schedule_id)) or schedule

    async def get(self, session_id: str, schedule_id: str) -> Schedule | None:
        s = self._core.keys.session(session_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.hget(s.schedules, schedule_id)
                pipe.zscore(s.partition.schedules, self._core.keys.member(session_id, schedule_id))
                raw, score = await pipe.execute()
        if raw is None or score is None:
            return None
        return _schedule(raw, int(float(score)))

    async def all(self, session_id: str) -> list[Schedule]:
        """The session's schedules, oldest first (at most MAX_SCHEDULES: no page needs a cursor)."""
        s = self._core.keys.session(session_id)
        with translate_redis_errors():
            records: dict[bytes, bytes] = await self._core.redis.hgetall(s.schedules)
            ids = sorted(key.decode() for key in records)
            if not ids:
                return []
            members = [self._core.keys.member(session_id, schedule_id) for schedule_id in ids]
            scores = await self._core.redis.zmscore(s.partition.schedules, members)
        return [
            _schedule(records[schedule_id.encode()], int(float(score)))
            for schedule_id, score in zip(ids, scores, strict=True)
            if score is not None
        ]

    async def delete(self, session_id: str, schedule_id: str) -> None:
        """Remove the schedule; NotFound when the session has none of that id."""
        s = self._core.keys.session(session_id)
        await self._core.scripts.run(
            "delete_schedule",
            {"meta": s.meta, "session_schedules": s.schedules},
            {"sid": session_id, "id": schedule_id},
            partition=s.partition,
        )

    async def fire(self, due: list[tuple[str, str]], now_ms: int | None = None) -> list[Fired | BaseException]:
        """Fire each schedule of `due` ((session id, schedule id), all of one partition, as its sweep found them)
        that is due: its text is posted as the session's input, and it moves to its next fire time after
        now (`now_ms`, this host's clock when None) or ends (an `at` schedule, or a cron that never
        matches again). Their records are read in one round trip and the firings go together, a batch of
        fire_schedule calls from the first (Scripts.run_together). Each answers on its own, an error
        included."""
        if not due:
            return []
        partition = self._core.keys.session(due[0][0]).partition
        found = await self._core.scripts.run("read_schedules", *self._reading(due), partition=partition)
        calls, due_times = self._firings(due, found, codec.now_ms() if now_ms is None else now_ms)
        replies = await self._core.scripts.run_together("fire_schedule", calls, partition=partition)
        return _fired(replies, due_times)

    async def fire_many(
        self, due: dict[int, list[tuple[str, str]]], now_ms: int | None = None
    ) -> dict[int, list[Fired | BaseException] | Exception]:
        """`fire` for several partitions at once (`due`: each partition's due schedules, as its sweep found
        them): the records of them all read in one pipelined round trip per Redis node, then the firings in
        another, so a due instant shared by thousands of schedules is two round trips a burst, not two a
        partition. Each partition answers with `fire`'s list, or the error that failed all of it."""
        keys = self._core.keys
        due = {number: members for number, members in due.items() if members}

        async def read(client: Redis, numbers: list[int]) -> list[list[list[Any] | Exception]]:
            groups: list[Group] = [
                ("read_schedules", keys.partition(number), [self._reading(due[number])]) for number in numbers
            ]
            return await self._core.scripts.pipelined(client, groups)

        now = codec.now_ms() if now_ms is None else now_ms
        answers: dict[int, list[Fired | BaseException] | Exception] = {}
        firings: dict[int, tuple[list[tuple[Keys, Args]], list[int]]] = {}
        for numbers, replies in await self._core.read_by_node(due, read):
            for i, number in enumerate(numbers):
                found = replies if isinstance(replies, Exception) else replies[i][0]
                if isinstance(found, Exception):
                    answers[number] = found
                else:
                    firings[number] = self._firings(due[number], found, now)

        async def fire(client: Redis, numbers: list[int]) -> list[list[list[Any] | Exception]]:
            groups: list[Group] = [("fire_schedule", keys.partition(number), firings[number][0]) for number in numbers]
            return await self._core.scripts.pipelined(client, groups)

        for numbers, replies in await self._core.read_by_node(firings, fire):
            for i, number in enumerate(numbers):
                if isinstance(replies, Exception):
                    answers[number] = replies
                else:
                    answers[number] = _fired(replies[i], firings[number][1])
        return answers

    def _reading(self, due: list[tuple[str, str]]) -> tuple[Keys, Args]:
        """read_schedules's keys and arguments for `due`."""
        keys = self._core.keys
        return (
            {"records": [keys.session(session_id).schedules for session_id, _ in due]},
            {"ids": [keys.member(session_id, schedule_id) for session_id, schedule_id in due]},
        )

    def _firings(
        self, due: list[tuple[str, str]], found: list[Any], now: int
    ) -> tuple[list[tuple[Keys, Args]], list[int]]:
        """fire_schedule's keys and arguments for each of `due` (`found`: read_schedules's answer), and the
        due time each acts on."""
        # Schedules due together mostly share their expression ("0 9 * * *" for every user): computed once.
        after: dict[tuple[str, str, int], int | None] = {}
        calls: list[tuple[Keys, Args]] = []
        due_times = []
        for i, (session_id, schedule_id) in enumerate(due):
            raw, score = found[2 * i], found[2 * i + 1]
            due_ms = int(float(score)) if score else 0
            next_ms = None
            if raw:
                schedule = _schedule(raw, due_ms)
                if schedule.cron is not None:
                    # After the due time too: on a clock behind Redis's, "after now" could be the due time itself.
                    calendar = (schedule.cron, schedule.timezone, max(now, due_ms))
                    if calendar not in after:
                        after[calendar] = next_fire_ms(*calendar)
                    next_ms = after[calendar]
            # No record: gone meanwhile (nothing to fire: 'stale'), or left in the index alone (dropped: 'gone').
            calls.append(self._firing(session_id, schedule_id, due_ms, next_ms))
            due_times.append(due_ms)
        return calls, due_times

    async def fire_one(self, session_id: str, schedule_id: str, now_ms: int | None = None) -> Fired:
        """`fire` for one schedule; its error raised."""
        (fired,) = await self.fire([(session_id, schedule_id)], now_ms)
        if isinstance(fired, BaseException):
            raise fired
        return fired

    async def _fire(self, session_id: str, schedule_id: str, due_ms: int, next_ms: int | None) -> Fired:
        keys, args = self._firing(session_id, schedule_id, due_ms, next_ms)
        (outcome,) = await self._core.scripts.run(
            "fire_schedule", keys, args, partition=self._core.keys.session(session_id).partition
        )
        return Fired(str(outcome), due_ms or None)

    def _firing(self, session_id: str, schedule_id: str, due_ms: int, next_ms: int | None) -> tuple[Keys, Args]:
        """fire_schedule's keys and arguments for one due time."""
        s = self._core.keys.session(session_id)
        run_keys, run_args = run_names(self._core.keys, session_id, uuid7())
        return {**run_keys, "session_schedules": s.schedules}, {
            **run_args,
            "id": schedule_id,
            # One input per due time, whichever worker fires it.
            "input_id": f"{schedule_id}@{due_ms}",
            "due_ms": due_ms,
            "next_ms": "" if next_ms is None else next_ms,
        }
