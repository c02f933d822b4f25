"""Deadlines and lapses fire on time with or without keyspace notifications; nothing is left behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from broker import Broker, Settings
from broker.codec import loads
from tests.helpers import HIGHLIGHT, call, commit, log_events, make_session, start_run, types
from tests.stack import opened_broker, run_worker, started_redis
from workers.timekeeper import Timekeeper


async def dispatch(broker: Broker, session_id: str, count: int) -> str:
    """A run waiting on `count` calls to a registered `web` client; returns the run id."""
    await broker.clients.register(session_id, "0190f2a0-0000-7000-8000-0000000000aa", "web", 60, [HIGHLIGHT])
    run = await start_run(broker, session_id)
    calls = [call("client__web__highlight_row") for _ in range(count)]
    assert (await commit(broker, session_id, run, calls)).outcome == "waiting"
    return run


async def wait_until(broker: Broker, session_id: str, kind: str, count: int, timeout: float = 5) -> None:
    async with asyncio.timeout(timeout):
        while (await types(broker, session_id)).count(kind) < count:
            await asyncio.sleep(0.01)


async def lapse_now(broker: Broker, session_id: str, client_id: str) -> None:
    """Make a lease run out now, as its ttl would: the key and its index entry expire together."""
    keys = broker.core.keys
    seconds, micros = await broker.core.redis.time()
    await broker.core.redis.pexpire(keys.session(session_id).lease(client_id), 1)
    await broker.core.redis.zadd(keys.leases, {keys.member(session_id, client_id): seconds * 1000 + micros // 1000})


def lateness_ms(events: list[dict[str, object]], ack_timeout_ms: float) -> list[float]:
    """How late each ack_timeout failure came after its call's dispatch plus the ack deadline."""
    from datetime import datetime

    def at(event: dict[str, object]) -> float:
        return datetime.fromisoformat(str(event["created_at"])).timestamp() * 1000

    dispatched = {e["call_id"]: at(e) for e in events if e["type"] == "client_tool_dispatched"}
    return [at(e) - dispatched[e["call_id"]] - ack_timeout_ms for e in events if e["type"] == "client_tool_failed"]


@pytest.fixture(scope="module")
def quiet_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis with keyspace notifications off, as many managed services run it."""
    with started_redis(Path(tmp_path_factory.mktemp("quiet")), notifications=False) as url:
        yield url


@pytest.fixture
async def quiet_broker(settings: Settings, quiet_redis: str) -> AsyncIterator[Broker]:
    async with opened_broker(settings, quiet_redis) as opened:
        yield opened


async def sweep_alone(broker: Broker, settings: Settings, interval_s: float, calls: int) -> str:
    """Dispatch `calls` calls and let a timekeeper with no notifications fail them all; the session."""
    alone = settings.model_copy(update={"sweep_interval_s": interval_s, "expiry_notifications": False})
    object.__setattr__(broker.core, "settings", alone)
    keeper = Timekeeper(broker)
    session_id = await make_session(broker)
    await dispatch(broker, session_id, calls)
    await keeper.start()
    try:
        await wait_until(broker, session_id, "client_tool_failed", calls)
    finally:
        await keeper.stop()
    return session_id


async def test_without_notifications_the_sweeper_fires_every_deadline_within_a_second(
    quiet_broker: Broker, settings: Settings
) -> None:
    # The production sweep interval, not the tests' shortened one.
    session_id = await sweep_alone(quiet_broker, settings, 0.1, 20)
    late = lateness_ms(await log_events(quiet_broker, session_id), settings.ack_timeout_s * 1000)
    assert len(late) == 20
    assert max(late) < 1000, late
    config = await quiet_broker.core.redis.config_get("notify-keyspace-events")
    assert config["notify-keyspace-events"] in ("", b"")


async def test_with_500000_unrelated_ttl_keys_and_no_notifications_every_deadline_fires_within_a_second(
    quiet_broker: Broker, settings: Settings
) -> None:
    redis, prefix = quiet_broker.core.redis, settings.key_prefix
    for start in range(0, 500_000, 20_000):
        async with redis.pipeline(transaction=False) as pipe:
            for i in range(start, start + 20_000):
                pipe.set(f"{prefix}:filler:{i}", b"x", px=3_600_000)
            await pipe.execute()
    assert (await redis.info("keyspace"))["db0"]["expires"] >= 500_000
    session_id = await sweep_alone(quiet_broker, settings, 0.1, 20)
    late = lateness_ms(await log_events(quiet_broker, session_id), settings.ack_timeout_s * 1000)
    assert len(late) == 20
    assert max(late) < 1000, late


async def test_the_sweeper_wakes_for_the_next_deadline_not_the_next_interval(
    quiet_broker: Broker, settings: Settings
) -> None:
    # An interval far longer than the test may take: only sleeping until the earliest due timer can
    # fire these deadlines in time.
    await sweep_alone(quiet_broker, settings, 60.0, 3)
    assert (await quiet_broker.timers.next_due_s([quiet_broker.core.keys.deadlines])) is None


async def test_notifications_alone_fire_deadlines(settings: Settings, redis_url: str) -> None:
    # A sweeper that never comes round: only the expiry events can fail these calls. Redis notices an
    # expired key by sampling a database's volatile keys, so with the rest of the suite's TTL keys in
    # database 0 an event can come seconds late (bench/deadlines.py measures it); database 9 holds only
    # this test's keys.
    quiet = settings.model_copy(update={"sweep_interval_s": 3600.0})
    async with opened_broker(quiet, redis_url.rsplit("/", 1)[0] + "/9") as broker:
        keeper = Timekeeper(broker)
        await keeper.start()
        try:
            await asyncio.sleep(0.1)  # the first sweep pass runs at start; the calls come after it
            session_id = await make_session(broker)
            await dispatch(broker, session_id, 5)
            await wait_until(broker, session_id, "client_tool_failed", 5, timeout=3)
        finally:
            await keeper.stop()
        assert (await types(broker, session_id)).count("tool_result") == 5


async def test_an_expired_lease_lapses_the_client_and_fails_its_calls(broker: Broker) -> None:
    session_id = await make_session(broker)
    await dispatch(broker, session_id, 2)
    client_id = "0190f2a0-0000-7000-8000-0000000000aa"
    await lapse_now(broker, session_id, client_id)
    keeper = Timekeeper(broker)
    await keeper.start()
    try:
        await wait_until(broker, session_id, "client_left", 1)
    finally:
        await keeper.stop()
    events = await log_events(broker, session_id)
    left = next(e for e in events if e["type"] == "client_left")
    assert left["reason"] == "timed_out"
    assert [e["reason"] for e in events if e["type"] == "client_tool_failed"] == ["client_gone", "client_gone"]
    assert (await broker.clients.ping(session_id, client_id)).status == 404


async def test_a_ping_just_after_the_lapse_is_refused_and_ends_the_client(broker: Broker) -> None:
    session_id = await make_session(broker)
    client_id = "0190f2a0-0000-7000-8000-0000000000cc"
    await broker.clients.register(session_id, client_id, "web", 5, [])
    assert (await broker.clients.ping(session_id, client_id)).status == 200
    await lapse_now(broker, session_id, client_id)
    await asyncio.sleep(0.01)
    # No timekeeper runs: the ping itself finds the lapse, and the client is never half alive.
    assert (await broker.clients.ping(session_id, client_id)).status == 404
    assert (await types(broker, session_id))[-1] == "client_left"
    assert (await broker.clients.ping(session_id, client_id)).status == 404
    assert (await types(broker, session_id)).count("client_left") == 1


async def test_work_left_behind_is_performed_once(broker: Broker, settings: Settings, redis_url: str) -> None:
    session_id = await make_session(broker)
    run = await dispatch(broker, session_id, 1)
    call_id = next(e["call_id"] for e in await log_events(broker, session_id) if e["type"] == "client_tool_dispatched")
    # Record the result as the API would, then "die" before performing the work it owed.
    owed = (
        await broker.clients.answer(session_id, "0190f2a0-0000-7000-8000-0000000000aa", call_id, "ok", is_error=False)
    ).owed
    assert owed == [f"s|{session_id}|{run}|1|0"]
    async with run_worker(settings, redis_url):
        await wait_until(broker, session_id, "run_completed", 1)
        # A late duplicate of the same step changes nothing.
        await broker.work.perform(owed)
        await asyncio.sleep(0.3)
    events = await log_events(broker, session_id)
    assert types_of(events).count("run_completed") == 1
    assert types_of(events).count("message_assistant") == 2
    assert not await broker.core.redis.zcard(broker.core.keys.work)


def types_of(events: list[dict[str, object]]) -> list[object]:
    return [e["type"] for e in events]


async def test_a_step_whose_worker_died_is_reclaimed_and_commits_once(
    broker: Broker, settings: Settings, redis_url: str
) -> None:
    session_id = await make_session(broker)
    # A worker began the step and died: nobody renews its lease, and its job is gone with it.
    run = await start_run(broker, session_id, "hello")
    await broker.core.redis.delete(broker.core.keys.work)
    async with run_worker(settings, redis_url):
        # The lease (1 s here) lapses; the sweeper gives the step to this worker as try 1.
        await wait_until(broker, session_id, "run_completed", 1, timeout=5)
    kinds = await types(broker, session_id)
    assert kinds.count("run_started") == 1
    assert kinds.count("message_assistant") == 1
    raw = await broker.log.after(session_id, 0, 1000)
    timings = [e for e in (loads(d) for _, d in raw) if e["type"] == "custom"]
    assert [t["payload"]["attempt"] for t in timings if t["payload"]["scope"] == "step"] == [1]
    assert run == timings[-1]["payload"]["run_id"]


async def test_a_step_that_keeps_losing_its_worker_ends_the_run(broker: Broker) -> None:
    session_id = await make_session(broker)
    run = await start_run(broker, session_id, "hello")
    keeper = Timekeeper(broker)
    await keeper.start()
    try:
        # Each try is taken by a "worker" that dies at once: nobody renews the 1 s lease.
        for attempt in range(1, 4):
            async with asyncio.timeout(5):
                while (await broker.runs.begin(session_id, run, 0, attempt, 25))[0] != "run":
                    await asyncio.sleep(0.05)
        await wait_until(broker, session_id, "run_failed", 1, timeout=5)
    finally:
        await keeper.stop()
    failed = next(e for e in await log_events(broker, session_id) if e["type"] == "run_failed")
    assert failed["error"] == "the worker running step 0 stopped 4 times; the run gives up"
