"""Scripts run as Functions on a pooled connection, and survive Redis forgetting them."""

from __future__ import annotations

import asyncio

import pytest

from broker.keys import KeySpace, PartitionKeys
from broker.scripts.runner import Scripts
from broker.scripts.source import library
from broker.transport.client import LeanPool, create_redis
from tests.helpers import aw

SPIN_200_MS = """
local function ms() local t = redis.call('TIME') return t[1] * 1000 + t[2] / 1000 end
local start = ms()
while ms() - start < 200 do end
return 1
"""


async def next_due(scripts: Scripts, partition: PartitionKeys) -> int:
    """The partition's next due time as the sweep arms it (-1 for none), through one script call."""
    reply = await scripts.raw("sweep", {"handed": partition.handed}, {"batch": 0}, partition)
    return int(reply[1])


async def test_scripts_forgotten_by_redis_are_loaded_again_on_first_use(redis_url: str, key_prefix: str) -> None:
    redis = create_redis(redis_url)
    partition = KeySpace(key_prefix).partition(0)
    try:
        scripts = Scripts(redis)
        await scripts.load()
        assert await scripts.loaded()
        assert await next_due(scripts, partition) == -1
        await redis.function_delete(library().name)
        assert not await scripts.loaded()
        await redis.zadd(partition.deadlines, {"t": 5})
        assert await next_due(scripts, partition) == 5
        assert await scripts.loaded()
    finally:
        await redis.aclose()


async def test_a_redis_with_functions_runs_the_library_and_keeps_one_copy(redis_url: str, key_prefix: str) -> None:
    redis = create_redis(redis_url)
    try:
        scripts = Scripts(redis)
        await scripts.load()
        await scripts.load()
        listed = await redis.function_list(library=library().name)
        assert len(listed) == 1
        assert await next_due(scripts, KeySpace(key_prefix).partition(1)) == -1
    finally:
        await redis.aclose()


async def test_script_calls_share_a_bounded_pool_and_hand_every_connection_back(
    redis_url: str, key_prefix: str
) -> None:
    redis = create_redis(redis_url, max_connections=3)
    try:
        scripts = Scripts(redis)
        await scripts.load()
        partitions = [KeySpace(key_prefix).partition(i) for i in range(50)]
        for i, partition in enumerate(partitions[:25]):
            await redis.zadd(partition.leases, {"t": i + 1})
        replies = await asyncio.gather(*(next_due(scripts, partition) for partition in partitions))
        assert replies == [i + 1 for i in range(25)] + [-1] * 25
        pool = redis.connection_pool
        assert isinstance(pool, LeanPool)
        assert pool.busy == 0
        assert pool.idle <= 3
    finally:
        await redis.aclose()


async def test_a_script_cancelled_before_its_reply_leaves_no_reply_behind(redis_url: str, key_prefix: str) -> None:
    redis = create_redis(redis_url, max_connections=1)
    blocker = create_redis(redis_url)
    keys = KeySpace(key_prefix)
    try:
        scripts = Scripts(redis)
        await scripts.load()
        await redis.zadd(keys.partition(0).steps, {"t": 9})
        # Redis busy for a moment, so the script's reply is still owed when it is cancelled.
        busy = asyncio.create_task(aw(blocker.eval(SPIN_200_MS, 0)))
        await asyncio.sleep(0.02)
        owed = asyncio.create_task(next_due(scripts, keys.partition(0)))
        await asyncio.sleep(0.05)
        owed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await owed
        await busy
        # Had the connection gone back with the reply unread, this call would read `9` for `-1`.
        assert await next_due(scripts, keys.partition(1)) == -1
    finally:
        await redis.aclose()
        await blocker.aclose()


async def test_a_partition_script_must_be_given_its_partition(redis_url: str, key_prefix: str) -> None:
    redis = create_redis(redis_url)
    try:
        scripts = Scripts(redis)
        with pytest.raises(ValueError, match="partition"):
            await scripts.raw("sweep", {}, {"batch": 0})
        with pytest.raises(ValueError, match="partition"):
            await scripts.raw(
                "idem_finish",
                {"receipt": "k", "session_meta": []},
                {"attempt": "a", "status": 0, "body": "", "ttl_ms": 0},
                KeySpace(key_prefix).partition(0),
            )
    finally:
        await redis.aclose()
