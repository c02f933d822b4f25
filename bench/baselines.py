"""Baselines, measured in the same run on the same Redis: raw Redis Streams (arq jobs: bench/arq_venv.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import cast

from redis.asyncio import Redis

from broker.transport import aio


async def xadd_xreadgroup(url: str, count: int) -> list[float]:
    """Latency (ms) from XADD to a consumer's XREADGROUP returning it, one message in flight."""
    producer, consumer = Redis.from_url(url), Redis.from_url(url)
    stream = f"baseline:{uuid.uuid4().hex}"
    await producer.xgroup_create(stream, "g", id="$", mkstream=True)
    latencies: list[float] = []
    try:
        for _ in range(count):
            sent = time.perf_counter()
            await producer.xadd(stream, {"t": "1"})
            await consumer.xreadgroup("g", "c", {stream: ">"}, count=1, block=1000)
            latencies.append((time.perf_counter() - sent) * 1000)
    finally:
        await producer.delete(stream)
        await producer.aclose()
        await consumer.aclose()
    return latencies


async def redis_round_trip(url: str, count: int, in_flight: int) -> tuple[list[float], float]:
    """A call as Redis alone does it: XADD, a consumer's XREADGROUP, XACK and a result pushed, the caller's
    BLPOP. Returns per-call latencies (ms) and calls per second with `in_flight` callers."""
    stream = f"baseline:{uuid.uuid4().hex}"
    admin = Redis.from_url(url)
    await admin.xgroup_create(stream, "g", id="$", mkstream=True)
    stop = asyncio.Event()

    async def consume() -> None:
        redis = Redis.from_url(url)
        try:
            while not stop.is_set():
                read = await redis.xreadgroup("g", "c", {stream: ">"}, count=100, block=100)
                batch = cast("list[tuple[bytes, list[aio.Entry]]] | None", read)
                for _, entries in batch or []:
                    async with redis.pipeline(transaction=False) as pipe:
                        for entry_id, fields in entries:
                            pipe.xack(stream, "g", entry_id)
                            pipe.lpush(f"{stream}:r:{fields[b'id'].decode()}", b"ok")
                        await pipe.execute()
        finally:
            await redis.aclose()

    latencies: list[float] = []
    per_caller = count // in_flight

    async def call_many() -> None:
        redis = Redis.from_url(url)
        try:
            for _ in range(per_caller):
                call = uuid.uuid4().hex
                sent = time.perf_counter()
                await redis.xadd(stream, {"id": call})
                await redis.blpop([f"{stream}:r:{call}"], timeout=10)
                latencies.append((time.perf_counter() - sent) * 1000)
        finally:
            await redis.aclose()

    consumer = asyncio.create_task(consume())
    started = time.perf_counter()
    await asyncio.gather(*(call_many() for _ in range(in_flight)))
    elapsed = time.perf_counter() - started
    stop.set()
    await consumer
    await admin.delete(stream)
    await admin.aclose()
    return latencies, len(latencies) / elapsed


async def expiry_lateness(url: str, count: int, spread_ms: int, wait_s: float = 30) -> list[float]:
    """How late Redis's own expired-key notification comes after a key's expiry (ms); those that have not
    come `wait_s` after the last key's expiry are left out."""
    redis = Redis.from_url(url)
    db = int(redis.connection_pool.connection_kwargs.get("db", 0))
    pubsub = redis.pubsub()
    await pubsub.subscribe(f"__keyevent@{db}__:expired")
    expected: dict[bytes, float] = {}
    prefix = f"baseline:exp:{uuid.uuid4().hex}:"
    async with redis.pipeline(transaction=False) as pipe:
        for i in range(count):
            ttl = 200 + (i * spread_ms) // count
            key = f"{prefix}{i}".encode()
            expected[key] = time.time() + ttl / 1000
            pipe.set(key, b"1", px=ttl)
        await pipe.execute()
    lateness: list[float] = []
    deadline = time.time() + spread_ms / 1000 + wait_s
    while expected and time.time() < deadline:
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
        if message and message["data"] in expected:
            lateness.append((time.time() - expected.pop(message["data"])) * 1000)
    await pubsub.aclose()
    await redis.aclose()
    return lateness
