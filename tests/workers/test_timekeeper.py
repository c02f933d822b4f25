"""Timers fire on time from the alarms alone (no polling, no keyspace notifications); a worker's partitions
pass to the others when it stops; work never begun and steps whose worker died are taken over."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from types import SimpleNamespace
from typing import cast

import pytest
from redis.asyncio import Redis

from broker import Broker
from broker.errors import NotFound
from broker.partitions import PARTITIONS
from broker.run_spans import RunSpans
from broker.services.keepers import owned
from broker.services.timers import Glance
from broker.services.work import Entry
from common.codec import loads
from common.tracing import Tracing
from switchboard.settings import Settings
from tests.helpers import HIGHLIGHT, aw, call, commit, log_events, make_session, start_run, types, work_entries
from tests.stack import opened_broker, run_worker
from workers.keeper import Keeper
from workers.timekeeper import Timekeeper

WEB = "0190f2a0-0000-7000-8000-0000000000aa"


async def dispatch(broker: Broker, session_id: str, count: int) -> str:
    """A run waiting on `count` calls to a registered `web` client; returns the run id."""
    await broker.clients.register(session_id, WEB, "web", 60, [HIGHLIGHT])
    run = await start_run(broker, session_id)
    calls = [call("client__web__highlight_row") for _ in range(count)]
    assert (await commit(broker, session_id, run, calls)).outcome == "waiting"
    return run


async def wait_until(broker: Broker, session_id: str, kind: str, count: int, timeout: float = 5) -> None:
    async with asyncio.timeout(timeout):
        while (await types(broker, session_id)).count(kind) < count:
            await asyncio.sleep(0.01)


async def lapse_now(broker: Broker, session_id: str, client_id: str) -> None:
    """Make a lease run out now, as its ttl would: the registration's expiry and its timer both now."""
    keys = broker.core.keys
    leases = keys.session(session_id).partition.leases
    node = broker.core.client_for(leases)
    seconds, micros = await node.time()
    now = seconds * 1000 + micros // 1000
    await broker.core.redis.hset(keys.session(session_id).client(client_id), "expires_at", now)
    await node.zadd(leases, {keys.member(session_id, client_id): now})


def lateness_ms(events: list[dict[str, object]], ack_timeout_ms: float) -> list[float]:
    """How late each ack_timeout failure came after its call's dispatch plus the ack deadline."""

    def at(event: dict[str, object]) -> float:
        return datetime.fromisoformat(str(event["created_at"])).timestamp() * 1000

    dispatched = {e["call_id"]: at(e) for e in events if e["type"] == "client_tool_dispatched"}
    return [at(e) - dispatched[e["call_id"]] - ack_timeout_ms for e in events if e["type"] == "client_tool_failed"]


@contextlib.asynccontextmanager
async def keeping(
    broker: Broker, worker: str = "w-test", run: Callable[[Entry], None] = lambda _: None
) -> AsyncIterator[Keeper]:
    """A worker's timekeeping alone (no work is taken): it keeps every partition while it is the only
    live worker."""
    timekeeper = Timekeeper(broker, worker, run, RunSpans(Tracing(), broker))
    # The tests' broker holds every setting (tests/conftest.py), the worker's among them.
    keeper = Keeper(
        cast("Broker[Settings]", broker),
        worker,
        "test-host",
        visit=timekeeper.visit,
        visit_many=timekeeper.visit_many,
        work=lambda _: None,
    )
    await keeper.start()
    try:
        yield keeper
    finally:
        await keeper.stop()


@pytest.mark.both_redis
@pytest.mark.short_deadlines
async def test_deadlines_fire_on_their_alarm_within_milliseconds_without_polling(
    broker: Broker, settings: Settings
) -> None:
    # A rescan far longer than the test may take: only the alarms can fire these deadlines in time.
    object.__setattr__(broker.core, "settings", settings.model_copy(update={"rescan_interval_s": 3600.0}))
    async with keeping(broker):
        session_id = await make_session(broker)
        await dispatch(broker, session_id, 20)
        await wait_until(broker, session_id, "client_tool_failed", 20)
    late = lateness_ms(await log_events(broker, session_id), settings.ack_timeout_s * 1000)
    assert len(late) == 20
    assert max(late) < 250, late
    assert not await broker.core.redis.zcard(broker.core.keys.session(session_id).partition.deadlines)


# The filler keys, made by Redis itself: packing 500,000 SETs in the test took 7 to 30 s of a loaded CI core,
# and this, not the timers, was the test's time.
FILL = """
for i = tonumber(ARGV[2]), tonumber(ARGV[3]) do
    redis.call('SET', ARGV[1] .. i, 'x', 'PX', 3600000)
end
return 1
"""


@pytest.mark.short_deadlines
async def test_with_500000_unrelated_ttl_keys_every_deadline_fires_on_time(
    broker: Broker, settings: Settings, redis_url: str
) -> None:
    async with Redis.from_url(redis_url) as redis:
        for start in range(0, 500_000, 50_000):
            await aw(redis.eval(FILL, 0, f"{settings.key_prefix}:filler:", start, start + 49_999))
        for i in (0, 499_999):
            assert 0 < await redis.pttl(f"{settings.key_prefix}:filler:{i}") <= 3_600_000
    async with keeping(broker):
        session_id = await make_session(broker)
        await dispatch(broker, session_id, 20)
        await wait_until(broker, session_id, "client_tool_failed", 20)
    late = lateness_ms(await log_events(broker, session_id), settings.ack_timeout_s * 1000)
    assert len(late) == 20
    assert max(late) < 250, late


@pytest.mark.short_deadlines
async def test_a_lost_alarm_is_caught_by_the_rescan(broker: Broker, settings: Settings) -> None:
    object.__setattr__(broker.core, "settings", settings.model_copy(update={"rescan_interval_s": 0.5}))
    async with keeping(broker) as keeper:
        # The keeper hears nothing of this session's partition: as if its alarms were lost on the way.
        keeper._on_alarm = lambda alarm: None  # type: ignore[method-assign]
        session_id = await make_session(broker)
        await dispatch(broker, session_id, 2)
        await wait_until(broker, session_id, "client_tool_failed", 2, timeout=3)


@pytest.mark.short_deadlines
async def test_a_subscription_made_again_under_its_reader_reads_every_partition_again(
    broker: Broker, settings: Settings, redis_url: str
) -> None:
    # A rescan far longer than the test: only noticing the reconnect can find what was rung meanwhile.
    object.__setattr__(broker.core, "settings", settings.model_copy(update={"rescan_interval_s": 3600.0}))
    async with keeping(broker) as keeper, Redis.from_url(redis_url) as redis:
        heard = keeper._on_alarm
        # The keeper hears nothing of this session's partition: as if its alarms were lost with a connection.
        keeper._on_alarm = lambda alarm: None  # type: ignore[method-assign]
        session_id = await make_session(broker)
        await dispatch(broker, session_id, 2)
        # Both ack deadlines (0.5 s) pass unseen.
        await asyncio.sleep(1.5)
        assert "client_tool_failed" not in await types(broker, session_id)
        keeper._on_alarm = heard  # type: ignore[method-assign]
        # The connection drops; redis-py makes it again and subscribes it again under the keeper's read,
        # without an error reaching it.
        subscribers = [c for c in await redis.client_list() if int(c.get("psub", 0)) > 0]
        assert len(subscribers) == 1, subscribers
        await aw(redis.client_kill_filter(_id=subscribers[0]["id"]))
        await wait_until(broker, session_id, "client_tool_failed", 2, timeout=3)


@pytest.mark.both_redis
async def test_a_takeover_reads_its_partitions_in_slices_and_the_loop_runs_between(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    timers, glance = broker.timers, broker.timers.glance
    slices: list[tuple[int, int]] = []
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def counted(partitions: list[int]) -> list[Glance]:
        slices.append((len(partitions), ticks))
        return await glance(partitions)

    monkeypatch.setattr(timers, "glance", counted)
    ticker = asyncio.create_task(tick())
    try:
        async with keeping(broker) as keeper:
            assert len(keeper.owned) == PARTITIONS
    finally:
        ticker.cancel()
    assert sum(size for size, _ in slices) == PARTITIONS
    assert max(size for size, _ in slices) <= 64
    # Another task ran between every two slices: the loop was not held for the whole read.
    assert all(later > earlier for (_, earlier), (_, later) in itertools.pairwise(slices))


async def earliest_in_indexes(broker: Broker, session_id: str) -> int | None:
    partition = broker.core.keys.session(session_id).partition
    node = broker.core.client_for(partition.alarm)
    firsts = [await node.zrange(index, 0, 0, withscores=True) for index in partition.timers]
    scores = [int(first[0][1]) for first in firsts if first]
    return min(scores) if scores else None


async def test_a_glance_finds_the_earliest_timer_and_waiting_work_from_the_alarm(broker: Broker) -> None:
    session_id = await make_session(broker)
    number = broker.core.keys.session(session_id).partition.number
    await broker.timers.sweep(number, 0)
    (made,) = await broker.timers.glance([number])
    # The session's retention timer, weeks away.
    assert made.earliest_ms == await earliest_in_indexes(broker, session_id)
    assert not made.failed
    await dispatch(broker, session_id, 3)
    # Timers set since moved the alarm, and those dropped since (the first step's lease, a deadline) left it
    # early, never late: a visit that finds nothing due sets it right.
    deadlines = broker.core.keys.session(session_id).partition.deadlines
    node = broker.core.client_for(deadlines)
    await node.zpopmin(deadlines)
    (early,) = await broker.timers.glance([number])
    earliest = await earliest_in_indexes(broker, session_id)
    assert early.earliest_ms is not None
    assert earliest is not None
    assert early.earliest_ms <= earliest
    assert (await broker.timers.sweep(number, 0)).next_due_ms == earliest
    (right,) = await broker.timers.glance([number])
    assert right.earliest_ms == earliest
    # Due members a sweep handed out sit behind the alarm until acted on: a keeper that died holding
    # them leaves its successor a partition to visit at once.
    member = broker.core.keys.member(session_id, "0190f2a0-0000-7000-8000-0000000000cc")
    await node.zadd(deadlines, {member: 1})
    handed = await broker.timers.sweep(number, 10)
    assert handed.deadlines == [(session_id, "0190f2a0-0000-7000-8000-0000000000cc")]
    assert handed.next_due_ms == earliest
    (orphaned,) = await broker.timers.glance([number])
    assert orphaned.earliest_ms is not None
    assert orphaned.earliest_ms < earliest
    await node.zrem(deadlines, member)
    assert not (await broker.timers.sweep(number, 10)).deadlines
    (acted,) = await broker.timers.glance([number])
    assert acted.earliest_ms == earliest
    assert not acted.has_work
    work = broker.core.keys.session(session_id).partition.work
    await node.xadd(work, {"w": f"d|{session_id}|{WEB}"})
    (working,) = await broker.timers.glance([number])
    assert working.has_work


async def test_an_expired_lease_lapses_the_client_and_fails_its_calls(broker: Broker) -> None:
    session_id = await make_session(broker)
    await dispatch(broker, session_id, 2)
    # The lease is what is tested: the calls' ack deadlines move a minute on,
    # so on a slow machine they cannot come due before the timekeeper sees the lapse.
    deadlines = broker.core.keys.session(session_id).partition.deadlines
    redis = broker.core.client_for(deadlines)
    due = cast("list[tuple[bytes, float]]", await redis.zrange(deadlines, 0, -1, withscores=True))
    await redis.zadd(deadlines, {member: score + 60_000 for member, score in due}, xx=True)
    await lapse_now(broker, session_id, WEB)
    async with keeping(broker):
        await wait_until(broker, session_id, "client_left", 1)
    events = await log_events(broker, session_id)
    left = next(e for e in events if e["type"] == "client_left")
    assert left["reason"] == "timed_out"
    assert [e["reason"] for e in events if e["type"] == "client_tool_failed"] == ["client_gone", "client_gone"]
    with pytest.raises(NotFound, match="register again"):
        await broker.clients.ping(session_id, WEB)


async def test_a_pinged_lease_is_moved_on_not_lapsed(broker: Broker, settings: Settings) -> None:
    session_id = await make_session(broker)
    await broker.clients.register(session_id, WEB, "web", 5, [])
    partition = broker.core.keys.session(session_id).partition
    member = broker.core.keys.member(session_id, WEB)
    node = broker.core.client_for(partition.leases)
    first = await node.zscore(partition.leases, member)
    # The index entry comes due at the first expiry (and the alarm with it); the pings moved the expiry on
    # meanwhile.
    await node.zadd(partition.leases, {member: 0})
    await node.set(partition.alarm, 0)
    assert "expires_at" in await broker.clients.ping(session_id, WEB)
    async with keeping(broker):
        async with asyncio.timeout(3):
            while (await node.zscore(partition.leases, member) or 0) < (first or 0):
                await asyncio.sleep(0.02)
    assert "client_left" not in await types(broker, session_id)


async def test_a_ping_just_after_the_lapse_is_refused_and_ends_the_client(broker: Broker) -> None:
    session_id = await make_session(broker)
    client_id = "0190f2a0-0000-7000-8000-0000000000cc"
    await broker.clients.register(session_id, client_id, "web", 5, [])
    assert "expires_at" in await broker.clients.ping(session_id, client_id)
    await lapse_now(broker, session_id, client_id)
    await asyncio.sleep(0.01)
    # No timekeeper runs: the ping itself finds the lapse, and the client is never half alive.
    with pytest.raises(NotFound, match=f"no active client {client_id}"):
        await broker.clients.ping(session_id, client_id)
    assert (await types(broker, session_id))[-1] == "client_left"
    with pytest.raises(NotFound, match=f"no active client {client_id}"):
        await broker.clients.ping(session_id, client_id)
    assert (await types(broker, session_id)).count("client_left") == 1


@pytest.mark.both_redis
async def test_work_taken_and_never_begun_is_taken_over_once(
    broker: Broker, settings: Settings, redis_url: str
) -> None:
    session_id = await make_session(broker)
    await dispatch(broker, session_id, 1)
    call_id = next(e["call_id"] for e in await log_events(broker, session_id) if e["type"] == "client_tool_dispatched")
    await broker.clients.answer(session_id, WEB, call_id, "ok", is_error=False)
    # A worker takes the continuation and dies before beginning it.
    partition = broker.core.keys.session(session_id).partition
    taken = await broker.work.take(partition.number, "dead-worker", 10)
    assert [e.kind for e in taken if e.session_id == session_id] == ["s"]
    async with run_worker(settings, redis_url):
        # Its claim (a lease, 1 s here) lapses, and a live worker runs the step.
        await wait_until(broker, session_id, "run_completed", 1)
    events = await log_events(broker, session_id)
    assert [e["type"] for e in events].count("message_assistant") == 2
    # (The run's notice, `n|`, is handed to webhooks apart: tests/api/test_webhooks.py.)
    assert [m for _, m in await work_entries(broker, session_id) if not m.startswith("n|")] == []
    assert not await broker.core.redis.zcard(partition.claims)


async def test_a_step_whose_worker_died_is_reclaimed_and_commits_once(
    broker: Broker, settings: Settings, redis_url: str
) -> None:
    session_id = await make_session(broker)
    # A worker began the step and died: nobody renews its lease.
    run = await start_run(broker, session_id, "hello")
    async with run_worker(settings, redis_url):
        # The lease (1 s here) lapses; the timekeeper gives the step to this worker as try 1.
        await wait_until(broker, session_id, "run_completed", 1, timeout=5)
    kinds = await types(broker, session_id)
    assert kinds.count("run_started") == 1
    assert kinds.count("message_assistant") == 1
    raw = await broker.log.after(session_id, 0, 1000)
    timings = [e for e in (loads(d) for _, d in raw) if e["type"] == "custom"]
    assert [t["payload"]["attempt"] for t in timings if t["payload"]["scope"] == "step"] == [1]
    assert run == timings[-1]["payload"]["run_id"]


async def test_a_step_that_keeps_losing_its_worker_ends_the_run(settings: Settings, redis_url: str) -> None:
    # A lease of its own, short: the test waits out four of them.
    short = settings.model_copy(update={"step_lease_s": 1.0})
    async with opened_broker(short, redis_url) as broker:
        await _losing_its_worker(broker)


async def _losing_its_worker(broker: Broker) -> None:
    session_id = await make_session(broker)
    run = await start_run(broker, session_id, "hello")
    async with keeping(broker):
        # Each try is taken by a "worker" that dies at once: nobody renews the 1 s lease.
        for attempt in range(1, 4):
            async with asyncio.timeout(5):
                while await broker.runs.begin(session_id, run, 0, attempt, 25) != "run":
                    await asyncio.sleep(0.05)
        await wait_until(broker, session_id, "run_failed", 1, timeout=5)
    failed = next(e for e in await log_events(broker, session_id) if e["type"] == "run_failed")
    assert failed["error"] == "the worker running step 0 stopped 4 times; the run gives up"


@pytest.mark.both_redis
async def test_workers_split_the_partitions_and_a_silent_one_loses_its_share_within_a_lease(
    broker: Broker, settings: Settings
) -> None:
    async with keeping(broker, "w-a") as a, keeping(broker, "w-b") as b:
        async with asyncio.timeout(3):
            while len(a.owned) + len(b.owned) != PARTITIONS or not a.owned or not b.owned:
                await asyncio.sleep(0.05)
        assert a.owned == owned(["w-a", "w-b"], "w-a")
        assert not a.owned & b.owned
        # b stops beating without leaving (a SIGKILLed worker): a keeps everything within one lease.
        await b.stop(leave=False)
        loop = asyncio.get_running_loop()
        stopped = loop.time()
        async with asyncio.timeout(settings.keeper_lease_s * 3):
            while len(a.owned) != PARTITIONS:
                await asyncio.sleep(0.02)
        # One lease, and a little for two test processes sharing two cores.
        assert loop.time() - stopped <= settings.keeper_lease_s + 0.3


def test_the_visit_heap_keeps_no_more_than_a_bound_of_superseded_entries() -> None:
    keeper = Keeper(cast("Broker[Settings]", SimpleNamespace()), "w", "host", visit=_never, work=lambda _: None)
    keeper.owned = frozenset(range(PARTITIONS))
    month_ms = 30 * 86_400_000
    # Each partition's next visit is a month away (a parked call's deadline); every step there rings a
    # lease ten seconds away first, whose visit finds the month-away timer again, 100 times over.
    for _ in range(100):
        for partition in range(PARTITIONS):
            keeper.ring(partition, month_ms)
            keeper.ring(partition, 10_000)
            del keeper._next[partition]  # as the clock does when it visits
    for partition in range(PARTITIONS):
        keeper.ring(partition, month_ms + partition)
    assert len(keeper._heap) <= 3 * PARTITIONS
    live = {(due, partition) for partition, due in keeper._next.items()}
    # Every live entry is still there to be visited (the superseded ones are dropped when they come up).
    assert live <= set(keeper._heap)


async def _never(partition: int) -> int | None:
    raise AssertionError("no visit in this test")
