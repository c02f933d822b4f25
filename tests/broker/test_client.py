"""The lean pool hands out only connections with nothing left to read, without probing each checkout."""

from __future__ import annotations

import asyncio

from broker.aio import aw
from broker.client import create_redis


async def test_a_command_cancelled_mid_reply_never_leaks_its_reply_to_the_next(redis_url: str, key_prefix: str) -> None:
    redis = create_redis(redis_url, max_connections=1)
    waiting, value = f"{key_prefix}:list", f"{key_prefix}:value"
    try:
        await redis.set(value, b"mine")
        for _ in range(5):
            blocked = asyncio.create_task(aw(redis.blpop([waiting], timeout=5)))
            await asyncio.sleep(0.05)
            blocked.cancel()
            await asyncio.gather(blocked, return_exceptions=True)
            # Had the cancelled BLPOP's connection gone back connected, its reply would answer the GET.
            await aw(redis.lpush(waiting, b"late"))
            assert await redis.get(value) == b"mine"
            assert await aw(redis.lrange(waiting, 0, -1)) == [b"late"]
            await redis.delete(waiting)
    finally:
        await redis.aclose()


async def test_concurrent_commands_each_get_their_own_connection(redis_url: str, key_prefix: str) -> None:
    redis = create_redis(redis_url)
    try:
        keys = [f"{key_prefix}:{i}" for i in range(200)]
        await asyncio.gather(*(redis.set(key, key.encode()) for key in keys))
        assert await asyncio.gather(*(redis.get(key) for key in keys)) == [key.encode() for key in keys]
    finally:
        await redis.aclose()
