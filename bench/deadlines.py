"""Scenario 4: how late `client_tool_failed` comes after its deadline, with 10,000 other deadlines pending
and 100,000 unrelated keys with long TTLs in the same Redis. Switchboard fires deadlines from its
partitions' alarms (no keyspace notifications). Baseline: Redis's own expired-key notification, on the
same loaded Redis. Then the same on a 3-master Redis Cluster (baseline: the one Redis, same run)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from bench import baselines
from bench.harness import (
    Cluster,
    Figure,
    Size,
    calls_text,
    cluster,
    created_at_s,
    figure,
    registered,
    scripted_agent,
    summary,
)
from broker.keys import KeySpace
from broker.transport.commands import Commands
from broker.transport.connect import open_redis

RESULT_TIMEOUT_S = 2
PENDING_WIDTH = 100
UNRELATED_TTL_S = 86_400


async def _unrelated_keys(url: str, count: int) -> None:
    connected = await open_redis(url)
    redis = connected.commands
    try:
        for start in range(0, count, 10_000):
            async with redis.pipeline() as pipe:
                for i in range(start, min(start + 10_000, count)):
                    pipe.set(f"unrelated:{i}", b"x" * 32, px=(UNRELATED_TTL_S + i % 3600) * 1000)
                await pipe.execute()
    finally:
        await connected.aclose()


async def _pending(redis: Commands, keys: KeySpace) -> int:
    async with redis.pipeline() as pipe:
        for partition in keys.partitions():
            pipe.zcard(partition.deadlines)
        return sum(await pipe.execute())


async def _wait_for(url: str, keys: KeySpace, count: int, timeout_s: float = 120) -> None:
    connected = await open_redis(url)
    try:
        until = time.monotonic() + timeout_s
        while await _pending(connected.commands, keys) < count:
            if time.monotonic() > until:
                raise TimeoutError(f"the deadline indexes never held {count}")
            await asyncio.sleep(0.1)
    finally:
        await connected.aclose()


def _lateness(log: list[dict[str, Any]], result_timeout_s: float) -> list[float]:
    """Per call failed on its result deadline: how long after ack + result timeout it failed (ms)."""
    acked = {e["call_id"]: created_at_s(e) for e in log if e["type"] == "client_tool_acked"}
    late = []
    for event in log:
        if event["type"] == "client_tool_failed" and event["reason"] == "result_timeout":
            due = acked[event["call_id"]] + result_timeout_s
            late.append((created_at_s(event) - due) * 1000)
    return late


@dataclass(frozen=True)
class _Shape:
    """`pending` other deadlines and `unrelated` keys; `measured` calls acked over `spread_s`, each failing
    `result_timeout_s` after its ack; their failures read `settle_s` after the last is due."""

    pending: int
    measured: int
    unrelated: int
    spread_s: float = 1.0
    result_timeout_s: float = RESULT_TIMEOUT_S
    settle_s: float = 1.5


async def _measure(running: Cluster, shape: _Shape) -> list[float]:
    pending, measured, unrelated = shape.pending, shape.measured, shape.unrelated
    await _unrelated_keys(running.redis.url, unrelated)
    deadlines = KeySpace("bench")
    async with running.client() as admin:
        agent_id = await scripted_agent(admin)
        # Calls dispatched and never acked: their ack deadline (600 s) stays pending throughout.
        holders = [await registered(running, admin, agent_id) for _ in range(pending // PENDING_WIDTH)]
        await asyncio.gather(*(holder.send(calls_text(PENDING_WIDTH)) for holder in holders))
        await _wait_for(running.redis.url, deadlines, pending)
        # The measured calls: acked one at a time so their result deadlines fall spread over a second.
        party = await registered(running, admin, agent_id)
        await party.send(calls_text(measured))
        await _wait_for(running.redis.url, deadlines, pending + measured)
        log = await party.log()
        calls = [e["call_id"] for e in log if e["type"] == "client_tool_dispatched"]
        for call_id in calls:
            await party.ack(call_id)
            await asyncio.sleep(shape.spread_s / measured)
        await asyncio.sleep(shape.result_timeout_s + shape.settle_s)
        late = _lateness(await party.log(), shape.result_timeout_s)
        for holder in (*holders, party):
            holder.close()
    if len(late) != measured:
        raise RuntimeError(f"{measured - len(late)} of {measured} calls did not fail on their deadline")
    return late


def run(size: Size) -> list[Figure]:
    shape = size.pick(
        smoke=_Shape(2 * PENDING_WIDTH, 10, 100, spread_s=0.2, result_timeout_s=1, settle_s=1.0),
        quick=_Shape(10_000, 100, 100_000),
        full=_Shape(10_000, 300, 100_000),
    )
    measured = shape.measured
    # How long the plain notifications are waited for after the last key's expiry.
    wait_s = size.pick(smoke=5.0, quick=30.0, full=30.0)
    extra = {"SWITCHBOARD_ACK_TIMEOUT_S": "600", "SWITCHBOARD_RESULT_TIMEOUT_S": f"{shape.result_timeout_s:g}"}
    # Notifications on, for the baseline only: Switchboard reads none.
    with cluster(notifications=True, extra=extra) as running:
        late = asyncio.run(_measure(running, shape))
        plain = asyncio.run(baselines.expiry_lateness(running.redis.url, measured, 1000, wait_s))
    # The same load on a 3-master Cluster: each master's partitions have their own alarms.
    with cluster(masters=3, extra=extra) as running:
        spread = summary(asyncio.run(_measure(running, shape)))
    ours, theirs = summary(late), summary(plain)
    missing = measured - len(plain)
    never = f"{missing} of {measured} plain notifications never came within {wait_s:g} s" if missing else ""
    base = "expired-key notification"
    return [
        figure("4 deadlines", "lateness p50", ours["p50"], "ms", baseline=theirs["p50"], baseline_name=f"{base} p50"),
        figure("4 deadlines", "lateness p99", ours["p99"], "ms", baseline=theirs["p99"], baseline_name=f"{base} p99",
               target="value < 250"),
        figure("4 deadlines", "lateness max", ours["max"], "ms", baseline=theirs["max"], baseline_name=f"{base} max",
               note=never),
        figure("4 deadlines", "lateness p50, 3-master Cluster", spread["p50"], "ms", baseline=ours["p50"],
               baseline_name="one Redis p50"),
        figure("4 deadlines", "lateness p99, 3-master Cluster", spread["p99"], "ms", baseline=ours["p99"],
               baseline_name="one Redis p99", target="value < 250"),
    ]  # fmt: skip
