"""Scenario 11: what each operation costs Redis, next to what Redis alone does for the same job.

One core of Redis carries every operation of its partitions, so Redis CPU per operation is the
deployment's cost and ceiling. Read from INFO cpu around each measurement, with Redis's idle background
(its cron, the worker's alarms and beats; measured just before, every process running) taken out:

- a client call round trip, 100 in flight (input, a step dispatching 100 calls, each acked and answered,
  the step after; per call) and 1 in flight (per run), next to the raw stream round trip (XADD,
  XREADGROUP, XACK, LPUSH of the result, the caller's BLPOP) at the same widths;
- a ping (next to a raw SET PX), a registration, a model step (a run whose input gets a text answer);
- which script costs what in the 100-in-flight round trip (SLOWLOG at threshold 0: every FCALL's (or EVALSHA's) time,
  grouped by script).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from bench import baselines
from bench.calls import Session, many_in_flight, one_in_flight, open_session
from bench.harness import Cluster, Figure, Size, cluster, figure, keyed, redis_cpu_s, scripted_agent
from broker.scripts.source import names_by_id
from broker.transport.embedded import EmbeddedRedis

IDLE_WINDOW_S = 5.0


async def _idle_rate(node: EmbeddedRedis, window_s: float = IDLE_WINDOW_S) -> float:
    before = await redis_cpu_s(node)
    await asyncio.sleep(window_s)
    return (await redis_cpu_s(node) - before) / window_s


async def _cost_us(node: EmbeddedRedis, idle: float, count: int, work: Callable[[], Awaitable[object]]) -> float:
    """Redis CPU (µs) per one of `count` operations `work` does, the idle background taken out."""
    before, started = await redis_cpu_s(node), time.monotonic()
    await work()
    used = await redis_cpu_s(node) - before - idle * (time.monotonic() - started)
    return used / count * 1e6


async def raw_set_px(url: str, count: int) -> None:
    redis = Redis.from_url(url)
    try:
        for i in range(count):
            await redis.set(f"baseline:set:{i}", b"1", px=20_000)
    finally:
        await redis.aclose()


async def pings(session: Session, count: int) -> None:
    for _ in range(count):
        await session.post(f"/clients/{session.client_id}/ping")


async def registrations(sessions: list[Session], per_session: int) -> None:
    for session in sessions:
        for number in range(per_session):
            body = {"name": f"r{number}", "lifetime": {"type": "never"}, "tools": []}
            status, content = await session.http.request("POST", f"/v1/sessions/{session.id}/clients", body, keyed())
            assert status == 201, content


async def _text_runs(session: Session, count: int) -> None:
    for _ in range(count):
        await session.send("hello")
        while (await anext(session.events)).event["type"] != "run_completed":
            pass


async def _script_costs(node: EmbeddedRedis, session: Session, batches: int, width: int) -> dict[str, list[float]]:
    """Every script call's duration (µs) during the batches, by script name."""
    redis = Redis.from_url(node.url)
    names = names_by_id()
    try:
        await redis.config_set("slowlog-max-len", 1_000_000)
        await redis.config_set("slowlog-log-slower-than", 0)
        await redis.slowlog_reset()
        await many_in_flight(session, batches, width)
        await redis.config_set("slowlog-log-slower-than", 10_000)
        entries = await redis.slowlog_get(-1)
        await redis.slowlog_reset()
    finally:
        await redis.aclose()
    found: dict[str, list[float]] = {}
    for entry in entries:
        command = entry["command"]
        words = command.split() if isinstance(command, bytes) else str(command).encode().split()
        if words and words[0].upper() in (b"EVALSHA", b"FCALL"):
            found.setdefault(names.get(words[1].decode(), "?"), []).append(float(entry["duration"]))
    return found


async def _measure(running: Cluster, size: Size) -> list[Figure]:
    node, url = running.redis, running.redis.url
    runs, batches, ping_count, sessions = size.pick(
        smoke=(3, 1, 50, 2), quick=(30, 3, 500, 10), full=(100, 10, 2000, 30)
    )
    # The raw round trips at 1 and 100 in flight; the idle window; the batches the scripts are timed over.
    raw_n, raw_wide_n = size.pick(smoke=(100, 500), quick=(1000, 5000), full=(1000, 5000))
    idle_s = size.pick(smoke=1.0, quick=IDLE_WINDOW_S, full=IDLE_WINDOW_S)
    script_batches = size.pick(smoke=1, quick=max(2, batches // 2), full=max(2, batches // 2))
    async with running.client() as admin:
        agent_id = await scripted_agent(admin)
        session = await open_session(running, admin, agent_id)
        others = [await open_session(running, admin, agent_id) for _ in range(sessions)]
        try:
            await one_in_flight(session, 3)
            await many_in_flight(session, 1, 100)
            idle = await _idle_rate(node, idle_s)
            one = await _cost_us(node, idle, runs, lambda: one_in_flight(session, runs))
            wide = await _cost_us(node, idle, batches * 100, lambda: many_in_flight(session, batches, 100))
            raw_one = await _cost_us(node, idle, raw_n, lambda: baselines.redis_round_trip(url, raw_n, 1))
            raw_wide = await _cost_us(node, idle, raw_wide_n, lambda: baselines.redis_round_trip(url, raw_wide_n, 100))
            ping = await _cost_us(node, idle, ping_count, lambda: pings(session, ping_count))
            raw_set = await _cost_us(node, idle, ping_count, lambda: raw_set_px(url, ping_count))
            register = await _cost_us(node, idle, sessions * 20, lambda: registrations(others, 20))
            step = await _cost_us(node, idle, runs, lambda: _text_runs(session, runs))
            scripts = await _script_costs(node, session, script_batches, 100)
        finally:
            session.close()
            for other in others:
                other.close()
    calls = script_batches * 100
    ranked = sorted(scripts.items(), key=lambda item: -sum(item[1]))
    breakdown = ", ".join(
        f"{name} {len(times) / calls:.2g}x {statistics.median(times):.0f} us" for name, times in ranked[:6]
    )
    figures = [
        figure("11 Redis cost", "round trip, 100 in flight, per call", wide, "us", baseline=raw_wide,
               baseline_name="raw stream round trip, 100 in flight", target="ratio <= 2"),
        figure("11 Redis cost", "round trip, 1 in flight, per run", one, "us", baseline=raw_one,
               baseline_name="raw stream round trip, 1 in flight", target="ratio <= 6"),
        figure("11 Redis cost", "ping", ping, "us", baseline=raw_set, baseline_name="raw SET PX",
               target="ratio <= 2"),
        figure("11 Redis cost", "registration", register, "us", baseline=raw_set, baseline_name="raw SET PX",
               target="ratio <= 3"),
        figure("11 Redis cost", "model step (a run answered with text)", step, "us"),
        figure("11 Redis cost", "scripts per call, 100 in flight", sum(len(t) for t in scripts.values()) / calls, "",
               note=breakdown),
    ]  # fmt: skip
    for name, times in ranked[:6]:
        figures.append(
            figure("11 Redis cost", f"script {name}: per call, 100 in flight", sum(times) / calls, "us",
                   note=f"{len(times) / calls:.2g} runs per call, median {statistics.median(times):.0f} us")
        )  # fmt: skip
    return figures


def run(size: Size) -> list[Figure]:
    with cluster() as running:
        time.sleep(size.pick(smoke=1, quick=3, full=3))  # the worker's first reads of its partitions
        return asyncio.run(_measure(running, size))
