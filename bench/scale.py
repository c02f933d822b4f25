"""Scenarios 7 and 8: what a deployment costs Redis when idle, and the same round trips spread over a
3-master Redis Cluster.

7 idle: one API and two workers doing nothing, on one Redis: Redis's CPU per second, next to the same
Redis with no client at all (its own cron), measured just before the processes start. Nothing may poll
the 1,024 partitions on a short interval, so this must stay small.

8 cluster: many sessions (spread over the partitions, so over the masters) making calls at once; each
node's share of Redis CPU, Redis CPU per round trip summed over the nodes, and the same on one Redis in
the same run: the per-core capacity the README's table is built from.
"""

from __future__ import annotations

import asyncio
import time

from redis.asyncio import Redis

from bench.calls import Session, many_in_flight, one_in_flight, open_session
from bench.harness import Cluster, Figure, cluster, figure, scripted_agent, summary
from broker.embedded import EmbeddedRedis


def _redis_cpu_s(node: EmbeddedRedis) -> float:
    async def read() -> float:
        redis = Redis.from_url(node.url)
        try:
            cpu = await redis.info("cpu")
        finally:
            await redis.aclose()
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

    return asyncio.run(read())


def _cpu_per_s(nodes: list[EmbeddedRedis], window_s: float) -> float:
    before = sum(_redis_cpu_s(node) for node in nodes)
    time.sleep(window_s)
    return (sum(_redis_cpu_s(node) for node in nodes) - before) / window_s


def idle(quick: bool) -> list[Figure]:
    window = 5.0 if quick else 15.0
    bare: list[float] = []

    def measure_bare(nodes: list[EmbeddedRedis]) -> None:
        bare.append(_cpu_per_s(nodes, window))

    with cluster(workers=2, before=measure_bare) as running:
        # Let start-up (each worker's first read of its partitions) pass.
        time.sleep(5)
        busy = _cpu_per_s([running.redis], window)
    return [
        figure("7 idle", "1 API + 2 workers idle, Redis CPU", busy * 1000, "ms/s", baseline=bare[0] * 1000,
               baseline_name="the same Redis with no client", target="value <= 10"),
    ]  # fmt: skip


async def _spread(running: Cluster, sessions: int, batches: int, width: int) -> tuple[int, float, list[float]]:
    """`sessions` sessions each making `batches` batches of `width` parallel calls, all at once: calls
    made, seconds taken, continuation latencies (ms) of a last one-call run per session."""
    async with running.client() as admin:
        agent_id = await scripted_agent(admin)
        opened: list[Session] = [await open_session(running, admin, agent_id) for _ in range(sessions)]
        try:
            await asyncio.gather(*(many_in_flight(s, 1, width) for s in opened))  # connections and warm-up
            started = time.monotonic()
            await asyncio.gather(*(many_in_flight(s, batches, width) for s in opened))
            took = time.monotonic() - started
            continuation: list[float] = []
            for session in opened[:10]:
                continuation += (await one_in_flight(session, 3))[2]
        finally:
            for session in opened:
                session.close()
    return sessions * batches * width, took, continuation


def _measured(masters: int, sessions: int, batches: int, width: int) -> tuple[list[float], int, float, list[float]]:
    with cluster(masters=masters) as running:
        nodes = running.nodes
        before = [_redis_cpu_s(node) for node in nodes]
        calls, took, continuation = asyncio.run(_spread(running, sessions, batches, width))
        used = [_redis_cpu_s(node) - at for node, at in zip(nodes, before, strict=True)]
    return used, calls, took, continuation


def spread(quick: bool) -> list[Figure]:
    # Many sessions, so their partitions spread over the masters as a real population would.
    sessions, batches, width = (30, 2, 5) if quick else (90, 4, 5)
    one_used, one_calls, one_took, _ = _measured(0, sessions, batches, width)
    used, calls, took, continuation = _measured(3, sessions, batches, width)
    per_call_us = sum(used) / calls * 1e6
    one_per_call_us = sum(one_used) / one_calls * 1e6
    shares = [u / sum(used) for u in used]
    return [
        figure("8 cluster", "Redis CPU per round trip, 3 masters (sum)", per_call_us, "us", baseline=one_per_call_us,
               baseline_name="one Redis, same load"),
        figure("8 cluster", "largest node share of Redis CPU", max(shares) * 100, "%",
               note=" / ".join(f"{s * 100:.0f}%" for s in shares), target="value <= 40"),
        figure("8 cluster", "round trips/s, 3 masters", calls / took, "/s", baseline=one_calls / one_took,
               baseline_name="one Redis, same load"),
        figure("8 cluster", "round trips/s per Redis core (one Redis)", 1e6 / one_per_call_us, "/s",
               note="a node's ceiling at one core; N masters: about N times this (a model, not measured)"),
        figure("8 cluster", "continuation p50, 3 masters", summary(continuation)["p50"], "ms", target="value < 10"),
    ]  # fmt: skip
