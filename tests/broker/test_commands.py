"""The broker's typed commands (broker/transport/commands.py) answer alike on one Redis and on a Cluster, and
on a Cluster they follow a slot being migrated (ASK) and one that moved (MOVED), alone and in a pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

import pytest
from redis.asyncio import Redis
from redis.exceptions import MovedError

from broker import Broker
from broker.partitions import SLOT_STRIDE
from broker.transport.aio import command
from broker.transport.commands import Commands
from broker.transport.connect import Connected, open_redis
from broker.transport.slots import SlotMap


@pytest.mark.both_redis
async def test_every_command_answers_as_declared(broker: Broker, key_prefix: str) -> None:
    redis = broker.core.redis
    # One hash tag: the multi-key commands (mget, unlink) route by their first key.
    string, other, hash_, index, members, stream = (f"{key_prefix}:{{cmd}}:{name}" for name in "soHzmx")
    assert await redis.ping()
    await redis.set(string, "v")
    await redis.set(other, b"w", nx=True, px=60_000)
    await redis.set(other, b"lost", nx=True)
    assert await redis.get(string) == b"v"
    assert await redis.mget(string, other, f"{key_prefix}:{{cmd}}:none") == [b"v", b"w", None]
    assert await redis.exists(string)
    await redis.unlink(string, other)
    assert not await redis.exists(string)
    assert await redis.get(other) is None

    await redis.hset(hash_, "a", "1")
    await redis.hset(hash_, mapping={"b": "2", "c": b"3"})
    assert await redis.hget(hash_, "a") == b"1"
    assert await redis.hmget(hash_, ["b", "none"]) == [b"2", None]
    assert await redis.hgetall(hash_) == {b"a": b"1", b"b": b"2", b"c": b"3"}
    assert await redis.hexists(hash_, "c")
    assert not await redis.hexists(hash_, "d")

    async with redis.pipeline() as pipe:
        pipe.zadd(index, {"a": 0, "b": 0, "c": 0, "d": 0})
        pipe.sadd(members, "x", "y", "z")
        pipe.zcard(index)
        pipe.smembers(members)
        pipe.hget(hash_, "a")
        pipe.hmget(hash_, ["a", "b"])
        pipe.hgetall(hash_)
        pipe.exists(hash_)
        assert await pipe.execute() == [4, 3, 4, {b"x", b"y", b"z"}, b"1", [b"1", b"2"], await redis.hgetall(hash_), 1]
    assert await redis.zrange(index, 0, -1) == [b"a", b"b", b"c", b"d"]
    assert await redis.lex_range(index, "(a", "+", 2) == [b"b", b"c"]
    assert await redis.lex_range(index, "+", "(b", 5, reverse=True) == [b"d", b"c"]
    await redis.zrem(index, "a", "b")
    assert await redis.zcard(index) == 2
    assert sorted(await redis.srandmember(members, 5)) == [b"x", b"y", b"z"]

    async with redis.pipeline() as pipe:
        pipe.set(string, "again", px=60_000)
        pipe.hset(hash_, "d", "4")
        pipe.hset(hash_, mapping={"e": "5"})
        pipe.srem(members, "x")
        pipe.zrem(index, "c")
        pipe.publish(f"{key_prefix}:{{cmd}}:channel", "nobody listens")
        pipe.unlink(hash_)
        assert await pipe.execute() == [True, 1, 1, 1, 1, 0, 1]
    assert await redis.get(string) == b"again"
    assert not await redis.exists(hash_)
    await redis.publish(f"{key_prefix}:{{cmd}}:channel", "nobody listens")

    node = broker.core.client_for(stream)
    # Every client answers bytes (decode_responses=False); redis-py types an id as either.
    ids = [cast("bytes", await node.xadd(stream, {"n": str(n)})) for n in range(3)]
    assert await redis.xrange(stream) == [(i, {b"n": str(n).encode()}) for n, i in enumerate(ids)]
    assert [i for i, _ in await redis.xrange(stream, min=ids[1].decode(), count=1)] == [ids[1]]
    assert [i for i, _ in await redis.xrevrange(stream, count=2)] == [ids[2], ids[1]]
    await node.xgroup_create(stream, "g", id="0")
    await node.xreadgroup("g", "member", {stream: ">"}, count=1)
    [held] = await redis.xpending_range(stream, "g", "-", "+", 5, "member")
    assert held["message_id"] == ids[0]
    await redis.xgroup_delconsumer(stream, "g", "member")
    assert await redis.xpending_range(stream, "g", "-", "+", 5, "member") == []


@pytest.fixture
async def cluster(cluster_redis_url: str) -> AsyncIterator[Connected]:
    connected = await open_redis(cluster_redis_url, name="test-commands")
    try:
        yield connected
    finally:
        await connected.aclose()


def _tag(slots: SlotMap, key_prefix: str) -> str:
    """A hash tag of this test's whose slot holds no partition (another test's key lands in it only by a
    1 in 16,384 chance)."""
    return next(
        tag for n in range(SLOT_STRIDE + 1) if slots.slot(f"{{{(tag := f'ask-{key_prefix}-{n}')}}}") % SLOT_STRIDE
    )


async def _node_id(slots: SlotMap, address: str) -> str:
    node_id: bytes = await command(slots.client(address), "CLUSTER", "MYID")
    return node_id.decode()


async def _migrate(slots: SlotMap, slot: int, keys: list[str], source: str, target: str) -> None:
    """Start moving `slot` from master `source` to master `target`, and move its `keys`: then `source`,
    still the owner, answers ASK for them."""
    await command(slots.client(target), "CLUSTER", "SETSLOT", slot, "IMPORTING", await _node_id(slots, source))
    await command(slots.client(source), "CLUSTER", "SETSLOT", slot, "MIGRATING", await _node_id(slots, target))
    if keys:
        host, _, port = target.rpartition(":")
        await command(slots.client(source), "MIGRATE", host, port, "", 0, 5000, "KEYS", *keys)


async def _settle(slots: SlotMap, slot: int, owner: str) -> None:
    """End a migration: `slot` is `owner`'s on every master, the new owner told first (its epoch moves on,
    so the Cluster keeps what it says)."""
    owner_id = await _node_id(slots, owner)
    for address in sorted(slots.masters(), key=lambda address: address != owner):
        await command(slots.client(address), "CLUSTER", "SETSLOT", slot, "NODE", owner_id)


async def test_a_slot_mid_migration_and_moved_is_followed_alone_and_in_a_pipeline(
    cluster: Connected, key_prefix: str
) -> None:
    slots, redis = cluster.slots, cluster.commands
    assert slots is not None
    tag = _tag(slots, key_prefix)
    text, record = f"{key_prefix}:{{{tag}}}:text", f"{key_prefix}:{{{tag}}}:record"
    slot = slots.slot(text)
    source = slots.address(slot)
    assert source is not None
    target = next(address for address in slots.masters() if address != source)
    await redis.set(text, "moved")
    await redis.hset(record, mapping={"a": "1"})
    try:
        await _migrate(slots, slot, [text, record], source, target)
        await _while_asked(redis, slots.client(target), text, record)
        # The slot is the target's now; the map read before still says the source, which answers MOVED.
        await _settle(slots, slot, target)
        assert slots.address(slot) == source
        assert await redis.get(text) == b"moved"
        assert slots.address(slot) == target
        async with redis.pipeline() as pipe:
            pipe.hget(record, "a")
            assert await pipe.execute() == [b"1"]
    finally:
        # The slot goes back, empty, where it was, for the tests that share the Cluster.
        await _settle(slots, slot, target)
        await redis.unlink(text, record)
        await _migrate(slots, slot, [], target, source)
        await _settle(slots, slot, source)
        await slots.refresh()
    assert slots.address(slot) == source


async def _while_asked(redis: Commands, target: Redis, text: str, record: str) -> None:
    # The source owns the slot but no longer holds the keys: each command goes on to the target, after
    # ASKING, whether alone or in a pipeline (where the source's ASK comes back as a reply).
    assert await redis.get(text) == b"moved"
    assert await redis.hgetall(record) == {b"a": b"1"}
    async with redis.pipeline() as pipe:
        pipe.hget(record, "a")
        pipe.exists(text)
        pipe.hset(record, "b", "2")
        assert await pipe.execute() == [b"1", 1, 1]
    assert await redis.hget(record, "b") == b"2"
    # They were served by the target: asked directly (without ASKING) it names the owner instead.
    with pytest.raises(MovedError):
        await target.hget(record, "b")
