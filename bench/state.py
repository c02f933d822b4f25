"""Scenario 6: 1,000 sessions holding 10,000 ttl clients that ping at ttl/2. What a session and a
registration cost Redis in memory, what a ping costs under that steady load, and whether any operation
costs more with 1,000 sessions than with one: each is measured on the empty deployment first, in the
same run, and again once the state is there."""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx
from redis.asyncio import Redis

from bench import population
from bench.calls import one_in_flight, open_session
from bench.harness import (
    Cluster,
    Figure,
    Size,
    cluster,
    cpu_seconds,
    figure,
    scripted_agent,
    summary,
)
from bench.http import RawHttp
from bench.population import Client, ping


async def _used_memory(redis: Redis) -> int:
    return int((await redis.info("memory"))["used_memory"])


async def _redis_cpu_s(redis: Redis) -> float:
    cpu = await redis.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


async def _command_usec(redis: Redis) -> float:
    """Time Redis spent executing commands since the last CONFIG RESETSTAT (INFO commandstats), which
    leaves out reading, parsing and replying."""
    stats = await redis.info("commandstats")
    return sum(float(entry["usec"]) for name, entry in stats.items() if name != "cmdstat_info")


async def _background(redis: Redis, window_s: float = 0.5) -> tuple[float, float]:
    """Redis's CPU and command time per second with no commands of ours: its cron (active expiry samples
    the volatile keys, so it grows with the number of ttl clients) and the timekeeper moving lease
    entries on as they come due (one per ttl client per ttl), which are costs of the state, not of any
    one operation."""
    await redis.config_resetstat()
    before = await _redis_cpu_s(redis)
    await asyncio.sleep(window_s)
    cpu = await _redis_cpu_s(redis) - before
    return cpu / window_s, await _command_usec(redis) / window_s


_ROUNDS = 5
_OWN_COST = {"api cpu", "redis cpu", "redis cmd"}


async def _probe(
    running: Cluster, admin: httpx.AsyncClient, agent_id: str, pings: int, rounds_n: int = _ROUNDS, calls: int = 20
) -> dict[str, float]:
    """Per-operation costs on a fresh session over `rounds_n` rounds (five but in a smoke run): sequential
    pings (their latency, and the CPU and command time each costs the API process and Redis: CPU rather
    than time, which a busy 2-core machine stretches; Redis's background CPU and command time, measured
    idle just before, taken out), and `calls` client calls end to end (dispatch and round trip).
    Latencies are the median round. CPU costs are the cheapest round: what the other processes on the
    2 cores add to one (cache misses, preemption) only ever adds, and moved single rounds by up to 1.7x,
    while the cheapest round is the operation's own cost."""
    redis = Redis.from_url(running.redis.url)
    session = await open_session(running, admin, agent_id)
    rounds: dict[str, list[float]] = {
        name: []
        for name in (
            "ping",
            "api cpu",
            "redis cpu",
            "redis cmd",
            "redis idle",
            "redis idle cmd",
            "dispatch",
            "round trip",
        )
    }
    try:
        client = Client(session.id, session.token, session.client_id)
        for _ in range(20):
            await ping(session.http, client)
        for _ in range(rounds_n):
            idle, idle_usec = await _background(redis)
            await redis.config_resetstat()
            api, store, began = cpu_seconds(running.api_pid), await _redis_cpu_s(redis), time.monotonic()
            latencies = [await ping(session.http, client) for _ in range(pings)]
            elapsed = time.monotonic() - began
            busy = await _redis_cpu_s(redis) - store - idle * elapsed
            commands = await _command_usec(redis) - idle_usec * elapsed
            rounds["api cpu"].append((cpu_seconds(running.api_pid) - api) / pings * 1e6)
            rounds["redis cpu"].append(busy / pings * 1e6)
            rounds["redis idle"].append(idle * 1000)
            rounds["redis idle cmd"].append(idle_usec / 1000)
            rounds["redis cmd"].append(commands / pings)
            rounds["ping"].append(summary(latencies)["p50"])
            dispatch, round_trip, _ = await one_in_flight(session, calls)
            rounds["dispatch"].append(summary(dispatch)["p50"])
            rounds["round trip"].append(summary(round_trip)["p50"])
    finally:
        session.close()
        await redis.aclose()
    return {name: min(values) if name in _OWN_COST else statistics.median(values) for name, values in rounds.items()}


async def _measure(running: Cluster, size: Size) -> list[Figure]:
    sessions_n, per_session = size.pick(smoke=(20, 10), quick=(1000, 10), full=(1000, 10))
    steady_s = size.pick(smoke=2.0, quick=12.0, full=30.0)
    pings = size.pick(smoke=50, quick=1000, full=2000)
    # Each probe's rounds, and the client calls of each round.
    rounds, calls = size.pick(smoke=(1, 3), quick=(_ROUNDS, 20), full=(_ROUNDS, 20))
    redis = Redis.from_url(running.redis.url)
    http = RawHttp(running.url, running.key)
    try:
        async with running.client() as admin:
            agent_id = await scripted_agent(admin)
            # The first, on cold processes, is not the baseline.
            await _probe(running, admin, agent_id, pings, rounds, calls)
            empty = await _probe(running, admin, agent_id, pings, rounds, calls)
            before = await _used_memory(redis)
            opened = await population.sessions(admin, agent_id, sessions_n)
            with_sessions = await _used_memory(redis)
            clients = await population.register(http, opened, per_session)
            with_clients = await _used_memory(redis)
            latencies, rate = await population.steady_pings(http, clients, steady_s)
            # Every ping answered 200 (population.ping raises on any other), so none had lapsed.
            full = await _probe(running, admin, agent_id, pings, rounds, calls)
    finally:
        http.close()
        await redis.aclose()
    steady = summary(latencies)
    state = f"{sessions_n:,} sessions, {len(clients):,} ttl clients"
    per = [
        ("API CPU per ping", "api cpu", "µs"),
        ("Redis CPU per ping", "redis cpu", "µs"),
        ("Redis command time per ping", "redis cmd", "µs"),
        ("Redis background CPU", "redis idle", "ms/s"),
        ("Redis background command time", "redis idle cmd", "ms/s"),
        ("ping p50", "ping", "ms"),
        ("dispatch p50", "dispatch", "ms"),
        ("round trip p50", "round trip", "ms"),
    ]
    return [
        figure("6 state", "Redis memory per session", (with_sessions - before) / sessions_n, "B",
               note="used_memory growth; the session's keys and its session_created event"),
        figure("6 state", "Redis memory per registration", (with_clients - with_sessions) / len(clients), "B",
               note="with its lease, name and client_registered event"),
        figure("6 state", "steady pings at ttl/2, p50", steady["p50"], "ms", note=f"{rate:.0f} pings/s, {state}"),
        figure("6 state", "steady pings at ttl/2, p99", steady["p99"], "ms", note=f"none lapsed in {steady_s:g} s"),
        *(
            figure("6 state", f"{label} at {state}", full[key], unit, baseline=empty[key],
                   baseline_name="same, empty deployment", target="ratio <= 1.25" if key in _OWN_COST else "")
            for label, key, unit in per
        ),
    ]  # fmt: skip


def run(size: Size) -> list[Figure]:
    with cluster() as running:
        return asyncio.run(_measure(running, size))
