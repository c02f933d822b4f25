"""Schedules fire through the timekeeper: once per due time whoever races for it, caught up by one
firing after a long stop, taken over from a worker that died after reading them, by the session's policy."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest

from broker import Broker
from broker.run_spans import RunSpans
from common.codec import uuid7
from common.tracing import Tracing
from tests.helpers import commit, log_events, make_session, start_run, types
from tests.workers.test_timekeeper import keeping
from workers.timekeeper import Timekeeper

pytestmark = pytest.mark.both_redis

EVERY_MINUTE = "* * * * *"


async def redis_now(broker: Broker, session_id: str) -> int:
    node = broker.core.client_for(broker.core.keys.session(session_id).partition.schedules)
    seconds, micros = await node.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def schedule(
    broker: Broker, session_id: str, next_ms: int, *, cron: str | None = None, text: str = "tick"
) -> str:
    """A schedule due at `next_ms` (a past one stands for fire times missed while no worker ran)."""
    schedule_id = uuid7()
    await broker.schedules.create(
        session_id,
        schedule_id,
        cron=cron,
        at_ms=None if cron else next_ms,
        timezone="UTC",
        text=text,
        next_ms=next_ms,
    )
    return schedule_id


def fired(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "message_user" and e.get("trigger") == "schedule"]


async def wait_fired(broker: Broker, session_id: str, count: int, timeout: float = 5) -> list[dict[str, Any]]:
    async with asyncio.timeout(timeout):
        while len(found := fired(await log_events(broker, session_id))) < count:
            await asyncio.sleep(0.02)
    return found


async def test_a_cron_missed_for_an_hour_is_caught_up_by_one_firing(broker: Broker) -> None:
    session_id = await make_session(broker)
    now = await redis_now(broker, session_id)
    schedule_id = await schedule(broker, session_id, now - 3_600_000, cron=EVERY_MINUTE)
    async with keeping(broker):
        (event,) = await wait_fired(broker, session_id, 1)
        # Sixty slots were missed; the next one is the first minute after now, not the second missed one.
        await asyncio.sleep(0.3)
    events = await log_events(broker, session_id)
    assert len(fired(events)) == 1
    assert event["source"] == "external"
    assert event["schedule_id"] == schedule_id
    assert event["message"]["content"][0]["data"]["text"] == "tick"
    moved = await broker.schedules.get(session_id, schedule_id)
    assert moved is not None
    # The first minute after the firing (this host's clock and Redis's are the one machine's here).
    fired_at = datetime.fromisoformat(event["created_at"]).timestamp() * 1000
    assert now < moved.next_fire_ms
    assert fired_at - 1_000 < moved.next_fire_ms <= fired_at + 61_000
    assert moved.next_fire_ms % 60_000 == 0


@pytest.mark.parametrize("cron", [None, EVERY_MINUTE])
async def test_two_workers_racing_for_one_due_time_fire_it_once(broker: Broker, cron: str | None) -> None:
    session_id = await make_session(broker)
    now = await redis_now(broker, session_id)
    schedule_id = await schedule(broker, session_id, now - 10, cron=cron)
    outcomes = await asyncio.gather(*(broker.schedules.fire_one(session_id, schedule_id) for _ in range(4)))
    assert [o.outcome for o in outcomes].count("new_run") == 1, outcomes
    assert {o.outcome for o in outcomes} <= {"new_run", "stale"}
    assert len(fired(await log_events(broker, session_id))) == 1
    # The same due time fired again (a worker retried after it had fired) changes nothing.
    assert (await broker.schedules._fire(session_id, schedule_id, now - 10, None)).outcome == "stale"
    assert len(fired(await log_events(broker, session_id))) == 1


async def test_an_at_schedule_ends_after_its_firing(broker: Broker) -> None:
    session_id = await make_session(broker)
    schedule_id = await schedule(broker, session_id, await redis_now(broker, session_id) - 10)
    assert (await broker.schedules.fire_one(session_id, schedule_id)).outcome == "new_run"
    assert await broker.schedules.get(session_id, schedule_id) is None
    assert await broker.schedules.all(session_id) == []
    partition = broker.core.keys.session(session_id).partition
    assert not await broker.core.redis.zcard(partition.schedules)


async def test_a_worker_dying_after_its_sweep_leaves_the_firing_to_the_next(broker: Broker) -> None:
    session_id = await make_session(broker)
    schedule_id = await schedule(broker, session_id, await redis_now(broker, session_id) - 10)
    partition = broker.core.keys.session(session_id).partition
    # A worker reads what is due (its alarm now set past it) and dies before firing anything.
    due = await broker.timers.sweep(partition.number, 500)
    assert (session_id, schedule_id) in due.schedules
    async with keeping(broker, "w-heir"):
        await wait_fired(broker, session_id, 1)
        await asyncio.sleep(0.3)
    assert len(fired(await log_events(broker, session_id))) == 1


@pytest.mark.parametrize(
    ("policy", "outcome", "kind"),
    [("steer", "steered", None), ("queue", "new_run", "run_queued"), ("drop", "drops_input", None)],
)
async def test_a_firing_during_a_run_follows_the_sessions_policy(
    broker: Broker, policy: str, outcome: str, kind: str | None
) -> None:
    session_id = await make_session(broker, policy=policy)
    run = await start_run(broker, session_id)
    now = await redis_now(broker, session_id)
    schedule_id = await schedule(broker, session_id, now - 10, cron=EVERY_MINUTE)
    before = await types(broker, session_id)
    assert (await broker.schedules.fire_one(session_id, schedule_id)).outcome == outcome
    after = await types(broker, session_id)
    # Nothing starts a second run while one is active: the input waits, steers or is dropped.
    assert "message_user" not in after[len(before) :]
    assert after[len(before) :] == ([kind] if kind else [])
    # Dropped or not, the firing happened: the schedule moved on.
    moved = await broker.schedules.get(session_id, schedule_id)
    assert moved is not None
    assert moved.next_fire_ms > now
    if policy == "drop":
        return
    # The input joins the log when it is read (steer: the run's next step; queue: its own run), marked.
    committed = await commit(broker, session_id, run, [])
    if policy == "steer":
        assert committed.outcome == "continue"
        assert await broker.runs.begin(session_id, run, 1, 0, 25) == "run"
    else:
        assert committed.outcome == "completed"
    (event,) = fired(await log_events(broker, session_id))
    assert event["schedule_id"] == schedule_id
    assert event["source"] == "external"


async def test_deleting_the_session_takes_its_schedules_out_of_the_index(broker: Broker) -> None:
    session_id = await make_session(broker)
    other = await make_session(broker)
    now = await redis_now(broker, session_id)
    for _ in range(3):
        await schedule(broker, session_id, now + 600_000, cron=EVERY_MINUTE)
    await broker.sessions.delete(session_id)
    keys = broker.core.keys
    index = keys.session(session_id).partition.schedules
    members = await broker.core.redis.zrange(index, 0, -1)
    assert not [m for m in members if bytes(m).decode().startswith(session_id)]
    assert not await broker.core.redis.exists(keys.session(session_id).schedules)
    assert (await broker.schedules.all(other)) == []


async def test_a_schedule_keeps_an_idle_session_from_retention(broker: Broker) -> None:
    idle, scheduled = await make_session(broker), await make_session(broker)
    now = await redis_now(broker, idle)
    await schedule(broker, scheduled, now + 86_400_000)
    for session_id in (idle, scheduled):
        # No activity since the epoch: past any retention.
        await broker.core.redis.hset(broker.core.keys.session(session_id).meta, "event_at", 0)
    assert await broker.sessions.retain(idle) == "purged"
    assert await broker.sessions.retain(scheduled) == "kept"
    assert len(await broker.schedules.all(scheduled)) == 1


async def sessions_of_one_partition(broker: Broker, count: int) -> list[str]:
    """`count` sessions whose ids share a partition (so a sweep finds their schedules together)."""
    keys = broker.core.keys
    first = uuid7()
    ids = [first]
    while len(ids) < count:
        candidate = uuid7()
        if keys.session(candidate).partition.number == keys.session(first).partition.number:
            ids.append(candidate)
    sample = await make_session(broker)
    meta = await broker.sessions.get(sample)
    for session_id in ids:
        await broker.sessions.create(
            session_id,
            agent_id=meta.agent_id,
            version_id=meta.agent_version_id,
            display_name="",
            created_by=meta.created_by,
            token=broker.sessions.new_token(session_id),
            policy="steer",
        )
    return ids


async def test_a_partitions_due_schedules_fire_together_each_once_and_a_rerun_fires_none_twice(
    broker: Broker,
) -> None:
    sessions = await sessions_of_one_partition(broker, 5)
    now = await redis_now(broker, sessions[0])
    # Cron and `at` schedules, two in one session, all due at one instant.
    due = [(sid, await schedule(broker, sid, now - 10, cron=EVERY_MINUTE)) for sid in sessions]
    due.append((sessions[0], await schedule(broker, sessions[0], now - 10)))
    partition = broker.core.keys.session(sessions[0]).partition
    swept = await broker.timers.sweep(partition.number, 500)
    assert sorted(swept.schedules) == sorted(due)
    # What a worker read before it fired: a worker that dies after firing and is retried sends this again.
    found = await broker.core.scripts.run(
        "read_schedules", *broker.schedules._reading(swept.schedules), partition=partition
    )
    calls, _ = broker.schedules._firings(swept.schedules, found, now)
    outcomes = await broker.schedules.fire(swept.schedules)
    assert not [o for o in outcomes if isinstance(o, BaseException)]
    # One run a session; the first session's second schedule steers its run.
    assert sorted(o.outcome for o in outcomes if not isinstance(o, BaseException)) == ["new_run"] * 5 + ["steered"]
    again = await broker.core.scripts.run_together("fire_schedule", calls, partition=partition)
    assert [reply[0] for reply in again if not isinstance(reply, BaseException)] == ["stale"] * 6
    # A second worker's sweep of the same instant finds nothing left due.
    assert (await broker.timers.sweep(partition.number, 500)).schedules == []
    counts = [len(fired(await log_events(broker, sid))) for sid in sessions]
    # The first session's run took its second schedule's text as a steer: it joins the log with its next step.
    assert counts == [1] * 5
    for sid, schedule_id in due[:5]:
        moved = await broker.schedules.get(sid, schedule_id)
        assert moved is not None
        assert moved.next_fire_ms > now
    assert await broker.schedules.get(*due[5]) is None


async def test_schedules_due_at_one_instant_in_many_partitions_fire_once_each(broker: Broker) -> None:
    sessions = [await make_session(broker) for _ in range(40)]
    partitions = {broker.core.keys.session(sid).partition.number for sid in sessions}
    assert len(partitions) > 1
    now = await redis_now(broker, sessions[0])
    due = [(sid, await schedule(broker, sid, now + 400, cron=EVERY_MINUTE)) for sid in sessions]
    async with keeping(broker):
        for sid in sessions:
            await wait_fired(broker, sid, 1)
        await asyncio.sleep(0.3)
    for sid, schedule_id in due:
        (event,) = fired(await log_events(broker, sid))
        assert event["schedule_id"] == schedule_id
        # Not before its due time: the firing is the schedule's input at its time.
        assert datetime.fromisoformat(event["created_at"]).timestamp() * 1000 >= now + 400


async def test_a_worker_dying_after_reading_many_partitions_leaves_each_firing_to_the_next(broker: Broker) -> None:
    sessions = [await make_session(broker) for _ in range(12)]
    now = await redis_now(broker, sessions[0])
    for sid in sessions:
        await schedule(broker, sid, now - 10)
    partitions = sorted({broker.core.keys.session(sid).partition.number for sid in sessions})
    # A worker sweeps them together, reads their records, and dies before the firings reach Redis.
    timekeeper = Timekeeper(broker, "w-dead", lambda _: None, RunSpans(Tracing(), broker))
    swept = await broker.timers.sweep_many(partitions, 500)
    assert sum(len(due.schedules) for due in swept.values() if not isinstance(due, Exception)) == 12
    async with keeping(broker, "w-heir"):
        for sid in sessions:
            await wait_fired(broker, sid, 1)
        await asyncio.sleep(0.3)
    for sid in sessions:
        assert len(fired(await log_events(broker, sid))) == 1
    # Visited again, nothing is due: the heir moved every schedule on.
    answers = await timekeeper.visit_many(partitions)
    assert not [a for a in answers.values() if isinstance(a, Exception)]
    for sid in sessions:
        assert len(fired(await log_events(broker, sid))) == 1
