"""The Redis commands the broker's services send, as one typed class over one Redis or a Cluster.

`Commands` declares each command the services use, with its reply as these clients give it (bytes: every
client is built with decode_responses=False), and `Batch` the ones they pipeline. Where a command goes is
its `CommandRoute`'s business: `OneRedis` sends everything to the one client; on a Cluster, `SlotRoute`
(broker/transport/routed.py) sends each to the master of its key's slot through the slot map's one
redirect loop. Each command is written once, as a call of redis-py's typed client method, so mypy checks
every one on both kinds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from broker.transport.aio import Entry, command, entries, members, record, reply

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Queued:
    """A command of a pipeline: the key it is routed by (None: any node), and the client method call.
    redis-py's pipeline is a client whose command methods queue (typed as the client's), so the same
    call queues on a pipeline and runs on a client (a command a Cluster moved is sent again alone)."""

    key: str | None
    call: Callable[[Redis], Awaitable[Any]]


class CommandRoute(Protocol):
    """Where commands go: the one Redis, or each to the node of its key's slot."""

    async def run(self, key: str | None, call: Callable[[Redis], Awaitable[T]]) -> T:
        """`call` on the client serving `key` (None: any master)."""
        ...

    async def batch(self, queued: list[Queued]) -> list[Any]:
        """`queued` in one round trip per node; the replies in the order queued. An error reply is
        raised (the first one), after every command was sent."""
        ...


class OneRedis:
    """Every command to the one client; a pipeline as one."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def run(self, key: str | None, call: Callable[[Redis], Awaitable[T]]) -> T:
        return await call(self._redis)

    async def batch(self, queued: list[Queued]) -> list[Any]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for command_ in queued:
                command_.call(pipe)
            return list(await pipe.execute())


class Commands:
    """The commands the broker's services send besides their scripts (those go by
    broker/scripts/runner.py); `pipeline()` queues some and sends them at once."""

    def __init__(self, route: CommandRoute) -> None:
        self._route = route

    def pipeline(self) -> Batch:
        """A pipeline without MULTI (a Cluster has none across nodes: write in an order readers can bear)."""
        return Batch(self._route)

    async def ping(self) -> bool:
        return bool(await self._route.run(None, lambda r: r.ping()))

    async def publish(self, channel: str, message: EncodableT) -> None:
        # Classic pub/sub reaches every node of a Cluster: any would do, the channel's slot's is as good.
        await self._route.run(channel, lambda r: r.publish(channel, message))

    async def get(self, key: str) -> bytes | None:
        return reply(await self._route.run(key, lambda r: r.get(key)))

    async def set(self, key: str, value: EncodableT, *, nx: bool = False, px: int | None = None) -> None:
        await self._route.run(key, lambda r: r.set(key, value, nx=nx, px=px))

    async def mget(self, *keys: str) -> list[bytes | None]:
        """Keys of one hash tag (routed by the first)."""
        return cast("list[bytes | None]", await self._route.run(keys[0], lambda r: r.mget(keys)))

    async def exists(self, key: str) -> bool:
        return bool(await self._route.run(key, lambda r: r.exists(key)))

    async def unlink(self, *keys: str) -> None:
        """Keys of one hash tag (routed by the first)."""
        await self._route.run(keys[0], lambda r: r.unlink(*keys))

    async def hget(self, key: str, field: str) -> bytes | None:
        return reply(await self._route.run(key, lambda r: r.hget(key, field)))

    async def hmget(self, key: str, fields: list[str]) -> list[bytes | None]:
        return cast("list[bytes | None]", await self._route.run(key, lambda r: r.hmget(key, fields)))

    async def hgetall(self, key: str) -> dict[bytes, bytes]:
        return record(await self._route.run(key, lambda r: r.hgetall(key)))

    async def hexists(self, key: str, field: str) -> bool:
        return bool(await self._route.run(key, lambda r: r.hexists(key, field)))

    async def hdel(self, key: str, *fields: str) -> None:
        await self._route.run(key, lambda r: r.hdel(key, *fields))

    async def hset(
        self,
        key: str,
        field: str | None = None,
        value: EncodableT | None = None,
        *,
        mapping: Mapping[FieldT, EncodableT] | None = None,
    ) -> None:
        await self._route.run(key, lambda r: r.hset(key, field, value, mapping=mapping))

    async def zrange(self, key: str, start: int, end: int) -> list[bytes]:
        return members(await self._route.run(key, lambda r: r.zrange(key, start, end)))

    async def zrevrange(self, key: str, start: int, end: int) -> list[bytes]:
        return members(await self._route.run(key, lambda r: r.zrevrange(key, start, end)))

    async def zrevrank(self, key: str, member: str) -> int | None:
        found: Any = await self._route.run(key, lambda r: r.zrevrank(key, member))
        return None if found is None else int(found)

    async def smembers(self, key: str) -> list[bytes]:
        found: Any = await self._route.run(key, lambda r: r.smembers(key))
        return sorted(bytes(m) for m in found)

    async def lex_range(self, key: str, start: str, stop: str, count: int, *, reverse: bool = False) -> list[bytes]:
        """ZRANGE BYLEX from `start` to `stop` (`stop` to `start` when `reverse`), the first `count`."""
        # Raw: redis-py's stub types the BYLEX bounds as ints.
        args = (key, start, stop, "BYLEX", *(("REV",) if reverse else ()), "LIMIT", 0, count)
        return members(await self._route.run(key, lambda r: command(r, "ZRANGE", *args)))

    async def zrem(self, key: str, *names: str) -> None:
        await self._route.run(key, lambda r: r.zrem(key, *names))

    async def zmscore(self, key: str, names: list[str]) -> list[float | None]:
        return cast("list[float | None]", await self._route.run(key, lambda r: r.zmscore(key, names)))

    async def zcard(self, key: str) -> int:
        return int(await self._route.run(key, lambda r: r.zcard(key)))

    async def srandmember(self, key: str, count: int) -> list[bytes]:
        # Raw: redis-py's stub types the reply with a count as one member.
        return members(await self._route.run(key, lambda r: command(r, "SRANDMEMBER", key, count)))

    async def xrange(self, key: str, min: str = "-", max: str = "+", count: int | None = None) -> list[Entry]:
        return entries(await self._route.run(key, lambda r: r.xrange(key, min, max, count)))

    async def xrevrange(self, key: str, max: str = "+", min: str = "-", count: int | None = None) -> list[Entry]:
        return entries(await self._route.run(key, lambda r: r.xrevrange(key, max, min, count)))

    async def xpending_range(
        self, key: str, group: str, min: str, max: str, count: int, consumer: str
    ) -> list[dict[str, Any]]:
        return list(await self._route.run(key, lambda r: r.xpending_range(key, group, min, max, count, consumer)))

    async def xgroup_delconsumer(self, key: str, group: str, consumer: str) -> None:
        await self._route.run(key, lambda r: r.xgroup_delconsumer(key, group, consumer))


class Batch:
    """Commands queued, then sent with `execute()` in one round trip per node; replies in the order queued
    (as redis-py types them: the caller knows what it queued)."""

    def __init__(self, route: CommandRoute) -> None:
        self._route = route
        self._queued: list[Queued] = []

    async def __aenter__(self) -> Batch:
        return self

    async def __aexit__(self, *_: object) -> None:
        self._queued = []

    async def execute(self) -> list[Any]:
        queued, self._queued = self._queued, []
        return await self._route.batch(queued)

    def _queue(self, key: str, call: Callable[[Redis], Awaitable[Any]]) -> None:
        self._queued.append(Queued(key, call))

    def publish(self, channel: str, message: EncodableT) -> None:
        self._queue(channel, lambda r: r.publish(channel, message))

    def set(self, key: str, value: EncodableT, *, px: int | None = None) -> None:
        self._queue(key, lambda r: r.set(key, value, px=px))

    def exists(self, key: str) -> None:
        self._queue(key, lambda r: r.exists(key))

    def unlink(self, *keys: str) -> None:
        """Keys of one hash tag (routed by the first)."""
        self._queue(keys[0], lambda r: r.unlink(*keys))

    def hget(self, key: str, field: str) -> None:
        self._queue(key, lambda r: r.hget(key, field))

    def hmget(self, key: str, fields: list[str]) -> None:
        self._queue(key, lambda r: r.hmget(key, fields))

    def hgetall(self, key: str) -> None:
        self._queue(key, lambda r: r.hgetall(key))

    def xrange(self, key: str, min: str = "-", max: str = "+", count: int | None = None) -> None:
        self._queue(key, lambda r: r.xrange(key, min=min, max=max, count=count))

    def hset(
        self,
        key: str,
        field: str | None = None,
        value: EncodableT | None = None,
        *,
        mapping: Mapping[FieldT, EncodableT] | None = None,
    ) -> None:
        self._queue(key, lambda r: r.hset(key, field, value, mapping=mapping))

    def hsetnx(self, key: str, field: str, value: EncodableT) -> None:
        self._queue(key, lambda r: r.hsetnx(key, field, value))

    def hincrby(self, key: str, field: str, amount: int) -> None:
        self._queue(key, lambda r: r.hincrby(key, field, amount))

    def expire(self, key: str, seconds: int) -> None:
        self._queue(key, lambda r: r.expire(key, seconds))

    def sadd(self, key: str, *names: str) -> None:
        self._queue(key, lambda r: r.sadd(key, *names))

    def srem(self, key: str, *names: str) -> None:
        self._queue(key, lambda r: r.srem(key, *names))

    def smembers(self, key: str) -> None:
        self._queue(key, lambda r: r.smembers(key))

    def zadd(self, key: str, mapping: Mapping[str, float]) -> None:
        self._queue(key, lambda r: r.zadd(key, dict(mapping)))

    def zrem(self, key: str, *names: str) -> None:
        self._queue(key, lambda r: r.zrem(key, *names))

    def zcard(self, key: str) -> None:
        self._queue(key, lambda r: r.zcard(key))

    def zscore(self, key: str, name: str) -> None:
        self._queue(key, lambda r: r.zscore(key, name))
