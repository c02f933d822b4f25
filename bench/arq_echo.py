"""The arq worker the baselines measure against: what a team would build with arq alone.

python -m bench.arq_echo REDIS_URL QUEUE POLL_DELAY_S
"""

from __future__ import annotations

import sys
import time
from typing import Any

import orjson
from arq.connections import RedisSettings
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


def main() -> None:
    url, queue, poll = sys.argv[1], sys.argv[2], float(sys.argv[3])
    worker = Worker(
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
    worker.run()


if __name__ == "__main__":
    main()
