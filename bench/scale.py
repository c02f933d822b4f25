"""Scenarios 7 and 8: what a deployment costs Redis when idle, and the same round trips spread over a
3-master Redis Cluster.

7 idle: one API and two workers doing nothing, on one Redis: Redis's CPU per second, next to the same
Redis with no client at all (its own cron), measured just before the processes start. Nothing may poll
the 1,024 partitions on a short interval, so this must stay small.

8 cluster: many sessions (spread over the partitions, so over the masters) making calls at once; each
node's share of Redis CPU, Redis CPU per round trip summed over the nodes, and the same on one Redis in
the same run: the per-core capacity docs/scaling.md's table is built from. Each node's idle background (its
cron and, on a Cluster, the bus's pings: a few ms/s per node) is measured just before and taken out.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from bench.calls import Session, many_in_flight, one_in_flight, open_session
from bench.harness import Cluster, Figure, Size, cluster, figure, redis_cpu_s, scripted_agent, summary
from broker.transport.embedded import EmbeddedRedis
from broker.transport.slots import SlotMap

# How long each node's idle background is measured before the load (a smoke run: SMOKE_WINDOW_S).
IDLE_WINDOW_S = 5.0
SMOKE_WINDOW_S = 0.5


def _redis_cpu_s(node: EmbeddedRedis) -> float:
    return asyncio.run(redis_cpu_s(node))


def _cpu_per_s(nodes: list[EmbeddedRedis], window_s: float) -> float:
    before = sum(_redis_cpu_s(node) for node in nodes)
    time.sleep(window_s)
    return (sum(_redis_cpu_s(node) for node in nodes) - before) / window_s


def idle(size: Size) -> list[Figure]:
    window = size.pick(smoke=SMOKE_WINDOW_S, quick=5.0, full=15.0)
    settle_s = size.pick(smoke=1.0, quick=5.0, full=5.0)
    bare: list[float] = []

    def measure_bare(nodes: list[EmbeddedRedis]) -> None:
        bare.append(_cpu_per_s(nodes, window))

    with cluster(workers=2, before=measure_bare) as running:
        # Let start-up (each worker's first read of its partitions) pass.
        time.sleep(settle_s)
        busy = _cpu_per_s([running.redis], window)
    return [
        figure("7 idle", "1 API + 2 workers idle, Redis CPU", busy * 1000, "ms/s", baseline=bare[0] * 1000,
               baseline_name="the same Redis with no client", target="value <= 10"),
    ]  # fmt: skip


async def _nodes_cpu_s(nodes: list[EmbeddedRedis]) -> list[float]:
    return [await redis_cpu_s(node) for node in nodes]


@dataclass
class _Load:
    calls: int
    took_s: float
    # Each node's Redis CPU (s) for the calls alone: its idle background rate times the span taken out.
    used_s: list[float]
    continuation: list[float]


@dataclass(frozen=True)
class _Shape:
    """How much scenario 8 does: `sessions` sessions each making `batches` batches of `width` parallel
    calls; each node's idle background measured over `idle_s`; the continuation sampled on
    `continued` sessions, `runs` runs each; `publishes` messages per command in the publish cost."""

    sessions: int
    batches: int
    width: int
    idle_s: float = IDLE_WINDOW_S
    settle_s: float = 3.0
    continued: int = 10
    runs: int = 3
    publishes: int = 50_000


async def _spread(running: Cluster, shape: _Shape) -> _Load:
    """`sessions` sessions each making `batches` batches of `width` parallel calls, all at once; Redis
    CPU is read around the batches only (sessions opened and warmed first), with each node's idle
    background measured just before (every process running, nothing calling) and taken out."""
    sessions, batches, width = shape.sessions, shape.batches, shape.width
    nodes = running.nodes
    async with running.client() as admin:
        agent_id = await scripted_agent(admin)
        opened: list[Session] = [await open_session(running, admin, agent_id) for _ in range(sessions)]
        try:
            await asyncio.gather(*(many_in_flight(s, 1, width) for s in opened))  # connections and warm-up
            idle_at = await _nodes_cpu_s(nodes)
            await asyncio.sleep(shape.idle_s)
            before = await _nodes_cpu_s(nodes)
            idle = [(b - a) / shape.idle_s for a, b in zip(idle_at, before, strict=True)]
            started = time.monotonic()
            await asyncio.gather(*(many_in_flight(s, batches, width) for s in opened))
            took = time.monotonic() - started
            after = await _nodes_cpu_s(nodes)
            span = time.monotonic() - started
            used = [b - a - rate * span for a, b, rate in zip(before, after, idle, strict=True)]
            continuation: list[float] = []
            for session in opened[: shape.continued]:
                continuation += (await one_in_flight(session, shape.runs))[2]
        finally:
            for session in opened:
                session.close()
    return _Load(sessions * batches * width, took, used, continuation)


def _measured(masters: int, shape: _Shape) -> tuple[_Load, dict[str, list[float]]]:
    with cluster(masters=masters) as running:
        time.sleep(shape.settle_s)  # the workers' first reads of their partitions
        load = asyncio.run(_spread(running, shape))
        publish = asyncio.run(_publish_cost(running.nodes, shape.publishes)) if masters else {}
    return load, publish


async def _publish_cost(nodes: list[EmbeddedRedis], count: int = 50_000) -> dict[str, list[float]]:
    """Each node's CPU (µs) per message published on the first node, with PUBLISH (which a Cluster copies
    to every node) and SPUBLISH (sharded: the channel's own node only), to a channel of that node's."""
    redis = Redis.from_url(nodes[0].url)
    try:
        ranges = await redis.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
        first, last = next((int(row[0]), int(row[1])) for row in ranges if int(row[2][1]) == nodes[0].port)
        channel = next(c for n in range(100_000) if first <= SlotMap.slot(c := f"{{bench{n}}}:live") <= last)
        payload = b"x" * 400  # about an event's size
        found: dict[str, list[float]] = {}
        for command in ("PUBLISH", "SPUBLISH"):
            before = await _nodes_cpu_s(nodes)
            for _ in range(count // 500):
                async with redis.pipeline(transaction=False) as pipe:
                    for _n in range(500):
                        pipe.execute_command(command, channel, payload)
                    await pipe.execute()
            after = await _nodes_cpu_s(nodes)
            found[command] = [(b - a) / count * 1e6 for a, b in zip(before, after, strict=True)]
    finally:
        await redis.aclose()
    return found


def spread(size: Size) -> list[Figure]:
    # Many sessions, so their partitions spread over the masters as a real population would.
    shape = size.pick(
        smoke=_Shape(6, 1, 5, idle_s=SMOKE_WINDOW_S, settle_s=1.0, continued=2, runs=1, publishes=2000),
        quick=_Shape(30, 4, 5),
        full=_Shape(90, 12, 5),
    )
    (one, _), (spread, publish) = _measured(0, shape), _measured(3, shape)
    per_call_us = sum(spread.used_s) / spread.calls * 1e6
    one_per_call_us = sum(one.used_s) / one.calls * 1e6
    shares = [u / sum(spread.used_s) for u in spread.used_s]
    return [
        figure("8 cluster", "Redis CPU per round trip, 3 masters (sum)", per_call_us, "us", baseline=one_per_call_us,
               baseline_name="one Redis, same load"),
        figure("8 cluster", "largest node share of Redis CPU", max(shares) * 100, "%",
               note=" / ".join(f"{s * 100:.0f}%" for s in shares), target="value <= 40"),
        figure("8 cluster", "round trips/s, 3 masters", spread.calls / spread.took_s, "/s",
               baseline=one.calls / one.took_s, baseline_name="one Redis, same load"),
        figure("8 cluster", "round trips/s per Redis core (one Redis)", 1e6 / one_per_call_us, "/s",
               note="a node's ceiling at one core; N masters: about N times this (a model, not measured)"),
        figure("8 cluster", "continuation p50, 3 masters", summary(spread.continuation)["p50"], "ms",
               target="value < 10"),
        figure("8 cluster", "PUBLISH, CPU on each other node per message", sum(publish["PUBLISH"][1:]) / 2, "us",
               note=f"on the publishing node {publish['PUBLISH'][0]:.2f} us; events publish on the session's node"),
        figure("8 cluster", "SPUBLISH, CPU on each other node per message", sum(publish["SPUBLISH"][1:]) / 2, "us",
               note=f"on the publishing node {publish['SPUBLISH'][0]:.2f} us (sharded pub/sub: not used yet)"),
    ]  # fmt: skip
