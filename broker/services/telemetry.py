"""Prometheus figures: the deployment's (read from Redis at scrape time) and a process's Redis round trip.

The deployment's figures are counted by the scripts themselves, into their partition's `stats` hash
(lib/partition.lua), so they are exact whichever process settled a call, survive restarts, and are the
same from every API replica: scrape `/metrics/cluster` through one address (the Service, the proxy), not
per pod. A reading sums every partition's hash, and the gauges that are the size of an index (work
waiting, steps running, pending deadlines), in one pipelined round trip per Redis node. While a Cluster
node is down, its partitions are left out and said so (`switchboard_cluster_partitions_unread`), the
gauges show the rest and the counters are left out: the reading still answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.asyncio import Redis

from broker.core import Core
from broker.errors import BrokerUnavailable, translate_redis_errors
from broker.partitions import PARTITIONS

# The buckets lib/partition.lua counts in (ms), in order (tests/unit/test_layout.py holds the two equal).
MS_BUCKETS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 300000)
FAIL_REASONS = ("client_gone", "ack_timeout", "result_timeout", "run_gone")
RUN_OUTCOMES = ("run_completed", "run_failed", "run_cancelled")
RTT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


@dataclass(frozen=True, slots=True)
class Figures:
    """One reading of the deployment: the stats hash and the sizes of the indexes beside it."""

    stats: dict[str, int]
    queue_depth: int
    steps_running: int
    deadlines: int
    leases: int
    work_owed: int
    read_s: float
    unread: int = 0
    """Partitions whose node did not answer: their counts are missing from every figure."""
    sessions_stored: int = 0
    redis_memory_bytes: int = 0
    """What Redis holds (used_memory), summed over the nodes that answered."""

    def count(self, field: str) -> int:
        return self.stats.get(field, 0)

    def histogram(self, name: str) -> tuple[list[tuple[str, float]], float]:
        """Cumulative (le in seconds, count) buckets and the sum in seconds of a latency counted in ms."""
        buckets: list[tuple[str, float]] = []
        total = 0
        for bound in MS_BUCKETS:
            total += self.count(f"{name}:le:{bound}")
            buckets.append((repr(bound / 1000), float(total)))
        total += self.count(f"{name}:le:+Inf")
        buckets.append(("+Inf", float(total)))
        return buckets, self.count(f"{name}:sum_ms") / 1000


_PER_PARTITION = 6


async def read_figures(core: Core) -> Figures:
    """The deployment's figures: every partition's hash and index sizes (a fixed number of commands,
    whatever the number of sessions), summed. A Cluster node that does not answer costs only its own
    partitions (counted in `unread`); with none read at all, BrokerUnavailable."""
    started = time.perf_counter()
    stats: dict[str, int] = {}
    sizes = [0] * (_PER_PARTITION - 1)
    unread = memory = 0
    failure: BrokerUnavailable | None = None
    for numbers, replies in await core.read_by_node(
        range(PARTITIONS), lambda client, numbers: _read(core, client, numbers)
    ):
        if isinstance(replies, BrokerUnavailable):
            unread += len(numbers)
            failure = replies
            continue
        memory += int(replies[-1].get("used_memory", 0))
        for at in range(0, len(replies) - 1, _PER_PARTITION):
            for name, value in replies[at].items():
                field = bytes(name).decode()
                stats[field] = stats.get(field, 0) + int(value)
            for i, size in enumerate(replies[at + 1 : at + _PER_PARTITION]):
                sizes[i] += int(size)
    if failure is not None and unread == PARTITIONS:
        raise failure
    queue, steps, deadlines, leases, claims = sizes
    with translate_redis_errors():
        sessions = int(await core.redis.zcard(core.keys.sessions))
    return Figures(
        stats, queue, steps, deadlines, leases, claims, time.perf_counter() - started, unread, sessions, memory
    )


async def _read(core: Core, client: Redis, numbers: list[int]) -> list[Any]:
    with translate_redis_errors():
        async with client.pipeline(transaction=False) as pipe:
            for number in numbers:
                partition = core.keys.partition(number)
                pipe.hgetall(partition.stats)
                pipe.xlen(partition.work)
                pipe.zcard(partition.steps)
                pipe.zcard(partition.deadlines)
                pipe.zcard(partition.leases)
                pipe.zcard(partition.claims)
            pipe.info("memory")
            replies: list[Any] = await pipe.execute()
    return replies


class _Snapshot(Collector):
    def __init__(self, figures: Figures) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        f = self._figures
        unread = "Partitions whose Redis node did not answer this reading (their counts are left out)"
        yield GaugeMetricFamily("switchboard_cluster_partitions_unread", unread, value=f.unread)
        if not f.unread:
            # A counter read without some partitions would drop, and Prometheus takes a drop for a reset
            # (rate() would count the whole counter again when they come back): none until all answer.
            yield from self._counters()
        yield from self._gauges()

    def _counters(self) -> Iterator[Metric]:
        f = self._figures
        for event in ("dispatched", "acked", "answered"):
            text = f"Client tool calls {event}, deployment-wide"
            yield CounterMetricFamily(f"switchboard_calls_{event}", text, value=f.count(f"calls_{event}"))
        waiting = "Client tool calls that began waiting for their client (on_leave: wait), deployment-wide"
        yield CounterMetricFamily("switchboard_calls_waiting", waiting, value=f.count("calls_waiting"))
        failed = CounterMetricFamily(
            "switchboard_calls_failed", "Dispatched client tool calls failed, by reason", labels=["reason"]
        )
        for reason in FAIL_REASONS:
            failed.add_metric([reason], f.count(f"calls_failed:{reason}"))
        yield failed
        for name, text in (
            ("dispatch_to_ack", "From dispatch to the client's ack"),
            ("ack_to_result", "From the ack to the client's result (0 for a result without an ack)"),
        ):
            buckets, total = f.histogram(name)
            yield HistogramMetricFamily(f"switchboard_call_{name}_seconds", text, buckets=buckets, sum_value=total)
        yield CounterMetricFamily("switchboard_runs_started", "Runs started", value=f.count("runs_started"))
        ended = CounterMetricFamily("switchboard_runs_ended", "Runs ended, by outcome", labels=["outcome"])
        for outcome in RUN_OUTCOMES:
            ended.add_metric([outcome.removeprefix("run_")], f.count(f"runs_ended:{outcome}"))
        yield ended

    def _gauges(self) -> Iterator[Metric]:
        f = self._figures
        active = f.count("clients_active")
        yield GaugeMetricFamily("switchboard_clients_active", "Active client registrations", value=active)
        runs = GaugeMetricFamily("switchboard_runs", "Runs by state: active (started, not ended), in_step (a "
                                 "worker holds its step)", labels=["state"])  # fmt: skip
        runs.add_metric(["active"], f.count("runs_active"))
        runs.add_metric(["in_step"], f.steps_running)
        yield runs
        depth = "Work entries (steps, server tool calls) waiting for a worker to begin them"
        yield GaugeMetricFamily("switchboard_queue_depth", depth, value=f.queue_depth)
        yield GaugeMetricFamily("switchboard_deadlines_pending", "Call deadlines and leases set", value=f.deadlines)
        yield GaugeMetricFamily("switchboard_client_leases", "Registrations with a ttl lease", value=f.leases)
        owed = "Work entries a worker took and has not begun yet (each under a claim that hands it on)"
        yield GaugeMetricFamily("switchboard_work_owed", owed, value=f.work_owed)
        yield GaugeMetricFamily("switchboard_cluster_read_seconds", "Time to read these figures", value=f.read_s)
        stored = "Sessions stored (a session with no activity for SWITCHBOARD_SESSION_RETENTION_S is purged)"
        yield GaugeMetricFamily("switchboard_sessions_stored", stored, value=f.sessions_stored)
        memory = "Memory Redis uses (used_memory), summed over the nodes that answered"
        yield GaugeMetricFamily("switchboard_redis_memory_bytes", memory, value=f.redis_memory_bytes)


def render_figures(figures: Figures) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(figures))
    return generate_latest(registry)


def redis_rtt_histogram(registry: CollectorRegistry) -> Histogram:
    return Histogram(
        "switchboard_redis_rtt_seconds", "This process's PING round trip to Redis", buckets=RTT_BUCKETS,
        registry=registry,
    )  # fmt: skip


async def probe_redis(round_trip: Callable[[], Awaitable[float]], histogram: Histogram, every_s: float) -> None:
    """PING Redis every `every_s` (`round_trip`: `Broker.round_trip`) and observe the round trip, until
    cancelled; a failed PING is skipped (readiness reports an unreachable Redis, not this)."""
    while True:
        with contextlib.suppress(Exception):
            histogram.observe(await round_trip())
        await asyncio.sleep(every_s)
