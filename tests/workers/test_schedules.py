"""Schedules fire through the timekeeper: once per due time whoever races for it, caught up by one
firing after a long stop, taken over from a worker that died after reading them, by the session's policy."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest

from broker import Broker
from common.codec import uuid7
from tests.helpers import commit, log_events, make_session, start_run, types
from tests.workers.test_timekeeper import keeping

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
