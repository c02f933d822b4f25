"""The lean pool hands out only connections with nothing left to read, without probing each checkout."""

from __future__ import annotations

import asyncio

from broker.transport.client import LeanPool, create_redis
from tests.helpers import aw


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
            await redis.lpush(waiting, b"late")
            assert await redis.get(value) == b"mine"
            assert await redis.lrange(waiting, 0, -1) == [b"late"]
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


async def test_past_the_bound_commands_wait_for_a_connection_rather_than_fail(redis_url: str, key_prefix: str) -> None:
    redis, other = create_redis(redis_url, max_connections=4), create_redis(redis_url)
    key = f"{key_prefix}:n"
    try:
        # All four connections held by blocking pops: the INCRs wait until the pops come back.
        pops = [asyncio.create_task(aw(redis.blpop([f"{key_prefix}:l{i}"], timeout=5))) for i in range(4)]
        await asyncio.sleep(0.05)
        counting = asyncio.gather(*(aw(redis.incr(key)) for _ in range(50)))
        await asyncio.sleep(0.1)
        assert not counting.done()
        assert await other.get(key) is None
        for i in range(4):
            await other.lpush(f"{key_prefix}:l{i}", b"go")
        assert sorted(await counting) == list(range(1, 51))
        await asyncio.gather(*pops)
        pool = redis.connection_pool
        assert isinstance(pool, LeanPool)
        assert pool.busy == 0
        assert pool.idle == 4
    finally:
        await redis.aclose()
        await other.aclose()


async def test_a_waiter_cancelled_leaves_the_queue_working(redis_url: str, key_prefix: str) -> None:
    redis = create_redis(redis_url, max_connections=4)
    try:
        held = [asyncio.create_task(aw(redis.blpop([f"{key_prefix}:h"], timeout=1))) for _ in range(4)]
        await asyncio.sleep(0.05)
        doomed = [asyncio.create_task(aw(redis.get(f"{key_prefix}:x"))) for _ in range(10)]
        waiting = [asyncio.create_task(aw(redis.incr(f"{key_prefix}:y"))) for _ in range(10)]
        await asyncio.sleep(0.05)
        for task in doomed:
            task.cancel()
        assert sorted(await asyncio.gather(*waiting)) == list(range(1, 11))
        await asyncio.gather(*held)
    finally:
        await redis.aclose()
