"""Scripts run by their SHA on a pooled connection, and survive Redis forgetting them."""

from __future__ import annotations

import asyncio

import pytest

from broker.aio import aw
from broker.client import create_redis
from broker.scripts import Scripts

SPIN_200_MS = """
local function ms() local t = redis.call('TIME') return t[1] * 1000 + t[2] / 1000 end
local start = ms()
while ms() - start < 200 do end
return 1
"""


async def test_a_flushed_script_cache_is_loaded_again_on_first_use(redis_url: str, key_prefix: str) -> None:
    redis = create_redis(redis_url)
    index = f"{key_prefix}:timers"
    try:
        scripts = Scripts(redis, f"{key_prefix}:stats")
        await scripts.load()
        assert await scripts.raw("next_due", [index], []) == -1
        await aw(redis.script_flush())
        await aw(redis.zadd(index, {"t": 0}))
        assert await scripts.raw("next_due", [index], []) == 0
    finally:
        await redis.aclose()


async def test_script_calls_share_a_bounded_pool_and_hand_every_connection_back(
    redis_url: str, key_prefix: str
) -> None:
    redis = create_redis(redis_url, max_connections=3)
    try:
        scripts = Scripts(redis, f"{key_prefix}:stats")
        await scripts.load()
        indexes = [f"{key_prefix}:t{i}" for i in range(50)]
        for i, index in enumerate(indexes[:25]):
            await aw(redis.zadd(index, {"t": i}))
        replies = await asyncio.gather(*(scripts.raw("next_due", [index], []) for index in indexes))
        assert replies == [0] * 25 + [-1] * 25
        pool = redis.connection_pool
        assert len(pool._in_use_connections) == 0
        assert len(pool._available_connections) <= 3
    finally:
        await redis.aclose()


async def test_a_script_cancelled_before_its_reply_leaves_no_reply_behind(redis_url: str, key_prefix: str) -> None:
    redis = create_redis(redis_url, max_connections=1)
    blocker = create_redis(redis_url)
    index = f"{key_prefix}:timers"
    try:
        scripts = Scripts(redis, f"{key_prefix}:stats")
        await scripts.load()
        await aw(redis.zadd(index, {"t": 0}))
        # Redis busy for a moment, so the script's reply is still owed when it is cancelled.
        busy = asyncio.create_task(aw(blocker.eval(SPIN_200_MS, 0)))
        await asyncio.sleep(0.02)
        owed = asyncio.create_task(scripts.raw("next_due", [index], []))
        await asyncio.sleep(0.05)
        owed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await owed
        await busy
        # Had the connection gone back with the reply unread, this call would read `0` for `-1`.
        assert await scripts.raw("next_due", [f"{key_prefix}:empty"], []) == -1
    finally:
        await redis.aclose()
        await blocker.aclose()
