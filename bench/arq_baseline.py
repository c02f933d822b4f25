"""The arq baseline: the same call built on arq alone, what a team would build with it.

arq 0.28 pins redis-py below 6 and Switchboard runs on the current redis-py, so this module runs in a
virtualenv of its own (`bench/.arq-venv`, made on first use by `bench.arq_venv`), never imported by the
bench itself:

    python -m bench.arq_baseline worker URL QUEUE POLL_S          an echo worker
    python -m bench.arq_baseline round_trip URL COUNT IN_FLIGHT POLL_S
    python -m bench.arq_baseline start URL COUNT POLL_S

The two measurements print one JSON object: {"latencies": [ms, ...], "rate": calls per second}.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.worker import Worker


def job_serializer(value: dict[str, Any]) -> bytes:
    """arq's job and result encoder as JSON (no pickle anywhere); a value JSON cannot hold is its repr."""
    return orjson.dumps(value, default=repr)


def job_deserializer(data: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = orjson.loads(data)
    return decoded


async def echo(ctx: dict[str, Any], value: str) -> str:
    return value


async def started(ctx: dict[str, Any], enqueued: float) -> float:
    """How long the job waited between its enqueue and its start (s)."""
    return time.time() - enqueued


def worker(url: str, queue: str, poll: float) -> None:
    arq_worker = Worker(
        functions=[echo, started],
        redis_settings=RedisSettings.from_dsn(url),
        queue_name=queue,
        poll_delay=poll,
        max_jobs=200,
        keep_result=60,
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        log_results=False,
    )
    # arq binds to the loop that exists when the Worker is built; its own run() uses that loop.
    arq_worker.run()


@contextlib.asynccontextmanager
async def running_worker(url: str, poll: float) -> AsyncIterator[ArqRedis]:
    """An echo worker process on its own queue, and a pool to enqueue to it, warmed by one job."""
    queue = f"baseline:arq:{uuid.uuid4().hex}"
    command = [sys.executable, "-m", "bench.arq_baseline", "worker", url, queue, str(poll)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: ASYNC220
    pool = await create_pool(
        RedisSettings.from_dsn(url),
        default_queue_name=queue,
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
    )
    try:
        job = await pool.enqueue_job("echo", "warm")
        assert job is not None
        await job.result(timeout=30, poll_delay=0.01)
        yield pool
    finally:
        process.terminate()
        process.wait(timeout=10)
        await pool.aclose()


async def round_trip(url: str, count: int, in_flight: int, poll: float) -> dict[str, Any]:
    """Enqueue a job, the worker runs it, the caller waits for its result (polling at the worker's delay)."""
    latencies: list[float] = []
    async with running_worker(url, poll) as pool:

        async def call_many(n: int) -> None:
            for _ in range(n):
                sent = time.perf_counter()
                job = await pool.enqueue_job("echo", "x")
                assert job is not None
                await job.result(timeout=60, poll_delay=poll)
                latencies.append((time.perf_counter() - sent) * 1000)

        began = time.perf_counter()
        await asyncio.gather(*(call_many(count // in_flight) for _ in range(in_flight)))
        elapsed = time.perf_counter() - began
    return {"latencies": latencies, "rate": len(latencies) / elapsed}


async def enqueue_to_start(url: str, count: int, poll: float) -> dict[str, Any]:
    """How long a job waits between enqueue and start (ms), one at a time."""
    waits: list[float] = []
    async with running_worker(url, poll) as pool:
        for _ in range(count):
            job = await pool.enqueue_job("started", time.time())
            assert job is not None
            waits.append(await job.result(timeout=30, poll_delay=0.005) * 1000)
    return {"latencies": waits, "rate": 0.0}


def main() -> None:
    what, url, *rest = sys.argv[1:]
    if what == "worker":
        worker(url, rest[0], float(rest[1]))
        return
    if what == "round_trip":
        result = asyncio.run(round_trip(url, int(rest[0]), int(rest[1]), float(rest[2])))
    else:
        result = asyncio.run(enqueue_to_start(url, int(rest[0]), float(rest[1])))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
