"""Scenario 4: how late `client_tool_failed` comes after its deadline, with 10,000 other deadlines pending
and 100,000 unrelated keys with long TTLs in the same Redis. Switchboard fires deadlines from its
partitions' alarms (no keyspace notifications). Baseline: Redis's own expired-key notification, on the
same loaded Redis. Then the same on a 3-master Redis Cluster (baseline: the one Redis, same run)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from redis.asyncio import Redis

from bench import baselines
from bench.harness import (
    Cluster,
    Figure,
    calls_text,
    cluster,
    created_at_s,
    figure,
    registered,
    scripted_agent,
    summary,
)
from broker.connect import open_redis
from broker.keys import KeySpace

RESULT_TIMEOUT_S = 2
PENDING_WIDTH = 100
UNRELATED_TTL_S = 86_400


async def _unrelated_keys(url: str, count: int) -> None:
    connected = await open_redis(url)
    redis = connected.redis
    try:
        for start in range(0, count, 10_000):
            async with redis.pipeline(transaction=False) as pipe:
                for i in range(start, min(start + 10_000, count)):
                    pipe.set(f"unrelated:{i}", b"x" * 32, ex=UNRELATED_TTL_S + i % 3600)
                await pipe.execute()
    finally:
        await connected.aclose()


async def _pending(redis: Redis, keys: KeySpace) -> int:
    async with redis.pipeline(transaction=False) as pipe:
        for partition in keys.partitions():
            pipe.zcard(partition.deadlines)
        return sum(await pipe.execute())


async def _wait_for(url: str, keys: KeySpace, count: int, timeout_s: float = 120) -> None:
    connected = await open_redis(url)
    try:
        until = time.monotonic() + timeout_s
        while await _pending(connected.redis, keys) < count:
            if time.monotonic() > until:
                raise TimeoutError(f"the deadline indexes never held {count}")
            await asyncio.sleep(0.1)
    finally:
        await connected.aclose()


def _lateness(log: list[dict[str, Any]]) -> list[float]:
    """Per call failed on its result deadline: how long after ack + result timeout it failed (ms)."""
    acked = {e["call_id"]: created_at_s(e) for e in log if e["type"] == "client_tool_acked"}
    late = []
    for event in log:
        if event["type"] == "client_tool_failed" and event["reason"] == "result_timeout":
            due = acked[event["call_id"]] + RESULT_TIMEOUT_S
            late.append((created_at_s(event) - due) * 1000)
    return late


async def _measure(running: Cluster, pending: int, measured: int, unrelated: int) -> list[float]:
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
            await asyncio.sleep(1.0 / measured)
        await asyncio.sleep(RESULT_TIMEOUT_S + 1.5)
        late = _lateness(await party.log())
        for holder in (*holders, party):
            holder.close()
    if len(late) != measured:
        raise RuntimeError(f"{measured - len(late)} of {measured} calls did not fail on their deadline")
    return late


def run(quick: bool) -> list[Figure]:
    pending, measured, unrelated = (10_000, 100, 100_000) if quick else (10_000, 300, 100_000)
    extra = {"SWITCHBOARD_ACK_TIMEOUT_S": "600", "SWITCHBOARD_RESULT_TIMEOUT_S": str(RESULT_TIMEOUT_S)}
    # Notifications on, for the baseline only: Switchboard reads none.
    with cluster(notifications=True, extra=extra) as running:
        late = asyncio.run(_measure(running, pending, measured, unrelated))
        plain = asyncio.run(baselines.expiry_lateness(running.redis.url, measured, 1000))
    # The same load on a 3-master Cluster: each master's partitions have their own alarms.
    with cluster(masters=3, extra=extra) as running:
        spread = summary(asyncio.run(_measure(running, pending, measured, unrelated)))
    ours, theirs = summary(late), summary(plain)
    missing = measured - len(plain)
    never = f"{missing} of {measured} plain notifications never came within 30 s" if missing else ""
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
