"""Scenario 9: what the client side of one script call costs the calling process, by the way it is sent.

Every API route is one script call (or a few), an FCALL of the scripts' Functions library, so the client path
is most of what the API spends per route that is not HTTP. Two pieces of ours replace redis-py's: LeanPool
(broker/transport/client.py: a checkout without redis-py's lock and socket probe, waiting rather than failing
when all connections are busy) and the packed send (`send_once` in broker/scripts/runner.py: the command
packed by hiredis and sent once, no retry wrapper, no response callbacks). Each is measured on and off, in
process, against the same Redis in the same run: the process's CPU per call and calls per second at 100 in
flight over 16 connections. The baseline is redis-py's own path (BlockingConnectionPool, `Redis.evalsha`), so
the ratios say what ours still buy on the redis-py this build runs. Both sides call one small script by
EVALSHA, which needs no library loaded: what the client does to pack, send and read a script call is the same
for an FCALL.

Then the fast lane (api/fastlane.py: acks, results and pings served ahead of FastAPI's routing), on and
off, in a whole deployment each (Redis, one API, one worker): calls per second of 100-wide batches of
client calls and the API process's CPU per call.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import redis as redis_py
from redis.asyncio import BlockingConnectionPool, Redis

from bench.calls import many_in_flight, open_session
from bench.harness import Figure, Size, cluster, cpu_seconds, figure, scripted_agent
from broker.scripts.runner import send_once
from broker.transport.client import create_redis
from broker.transport.embedded import EmbeddedRedis

# A script as small as the hot ones are around their commands: one read, one write.
SCRIPT = "local v = redis.call('HGET', KEYS[1], 'n') redis.call('HSET', KEYS[1], 'n', ARGV[1]) return v"
CONNECTIONS = 16
IN_FLIGHT = 100


async def evalsha(redis: Redis, sha: str, keys: list[str], args: list[int]) -> Any:
    """One EVALSHA packed and sent once on our pool, as every script call of the broker (an FCALL) is sent."""
    return await send_once(redis, ("EVALSHA", sha, len(keys), *keys, *args))


def _stock(url: str) -> Redis:
    """redis-py's own pool with what create_redis sets (a bound that waits, as LeanPool's does)."""
    pool = BlockingConnectionPool.from_url(
        url, max_connections=CONNECTIONS, timeout=10, health_check_interval=15, socket_keepalive=True
    )
    return Redis.from_pool(pool)


async def _measure(client: Redis, packed: bool, sha: str, calls: int) -> tuple[float, float]:
    """Process CPU per call (µs) and calls per second."""
    per_caller = calls // IN_FLIGHT

    async def caller(number: int) -> None:
        keys = [f"bench:client:{number}"]
        for i in range(per_caller):
            if packed:
                await evalsha(client, sha, keys, [i])
            else:
                await client.evalsha(sha, 1, *keys, i)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(caller(n) for n in range(IN_FLIGHT)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / (per_caller * IN_FLIGHT) * 1e6, per_caller * IN_FLIGHT / wall


async def _all(
    url: str, calls: int, rounds: int, warm: int = IN_FLIGHT * 10
) -> dict[tuple[bool, bool], list[tuple[float, float]]]:
    lean, stock = create_redis(url, max_connections=CONNECTIONS), _stock(url)
    sha = str(await lean.script_load(SCRIPT))
    found: dict[tuple[bool, bool], list[tuple[float, float]]] = {}
    try:
        for client in (lean, stock):
            await _measure(client, False, sha, warm)  # opens the connections
        # Interleaved rounds, so a slow moment of the machine falls on every variant alike.
        for _ in range(rounds):
            for client, is_lean in ((lean, True), (stock, False)):
                for packed in (True, False):
                    found.setdefault((is_lean, packed), []).append(await _measure(client, packed, sha, calls))
    finally:
        await lean.aclose()
        await stock.aclose()
    return found


def run(size: Size) -> list[Figure]:
    calls, rounds = size.pick(smoke=(500, 1), quick=(5_000, 3), full=(20_000, 5))
    warm = size.pick(smoke=IN_FLIGHT, quick=IN_FLIGHT * 10, full=IN_FLIGHT * 10)
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as workdir:
        node = EmbeddedRedis(Path(workdir) / "redis", persistent=False)
        node.start()
        try:
            found = asyncio.run(_all(node.url, calls, rounds, warm))
        finally:
            node.stop()
    # The median round of each variant.
    cpu = {variant: sorted(c for c, _ in rows)[len(rows) // 2] for variant, rows in found.items()}
    rate = {variant: sorted(r for _, r in rows)[len(rows) // 2] for variant, rows in found.items()}
    stock = f"redis-py {redis_py.__version__} pool and evalsha"
    variants = {(True, True): "LeanPool + packed (ours)", (True, False): "LeanPool, redis-py evalsha",
                (False, True): "redis-py pool, packed"}  # fmt: skip
    figures = []
    for measured, what, unit in ((cpu, "CPU per script call", "us"), (rate, "calls/s, 100 in flight", "/s")):
        for variant, label in variants.items():
            figures.append(
                figure("9 client path", f"{what}: {label}", measured[variant], unit,
                       baseline=measured[False, False], baseline_name=stock)
            )  # fmt: skip
    return figures + _fast_lane(size)


def _fast_lane(size: Size) -> list[Figure]:
    batches = size.pick(smoke=1, quick=5, full=20)
    warm = size.pick(smoke=1, quick=2, full=2)
    found: dict[bool, tuple[float, float]] = {}
    for on in (True, False):
        with cluster(extra={"SWITCHBOARD_FAST_LANE": "true" if on else "false"}) as running:

            async def measure() -> tuple[float, float]:
                async with running.client() as admin:
                    session = await open_session(running, admin, await scripted_agent(admin))
                    try:
                        await many_in_flight(session, warm, IN_FLIGHT)
                        before = cpu_seconds(running.api_pid)
                        _, rate = await many_in_flight(session, batches, IN_FLIGHT)
                        return rate, (cpu_seconds(running.api_pid) - before) / (batches * IN_FLIGHT) * 1e6
                    finally:
                        session.close()

            found[on] = asyncio.run(measure())
    (rate_on, cpu_on), (rate_off, cpu_off) = found[True], found[False]
    return [
        figure("9 client path", "fast lane: calls/s, 100 in flight", rate_on, "/s", baseline=rate_off,
               baseline_name="fast lane off (SWITCHBOARD_FAST_LANE=false)"),
        figure("9 client path", "fast lane: API CPU per call, 100 in flight", cpu_on, "us", baseline=cpu_off,
               baseline_name="fast lane off", note="ack and result through the API, its dispatch and events"),
    ]  # fmt: skip
