"""A Redis Cluster client in the shape of a one-node one: each command goes to the master of its key's slot
on that node's own pool, and a pipeline is split by node.

Why not redis-py's cluster client: when one node stops answering, it closes the connections to every node
(`RedisCluster._execute_command` on ConnectionError), so each request for a dead master's partitions
failed commands in flight on the healthy ones. Here a node that is down fails only what it holds; the
slot map (`broker/transport/slots.py`) is read again on MOVED or a node that cannot be reached, and a command that
met MOVED, ASK or TRYAGAIN or could not connect (so never ran) is sent again where the slot is now.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import AskError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError

from broker.transport.slots import NotSent, SlotMap

# Commands sent through `execute_command` name the command first and the key second.
_RAW = "execute_command"


def _key(name: str, args: tuple[Any, ...]) -> str | bytes | None:
    at = 1 if name == _RAW else 0
    if len(args) <= at:
        return None
    key = args[at]
    return key if isinstance(key, str | bytes) else None


class Routed:
    """The command methods of `redis.asyncio.Redis`, each routed by its first key (keyless ones go to any
    master). Typed by its users as `Redis`."""

    def __init__(self, slots: SlotMap) -> None:
        self._slots = slots

    def client_for(self, key: str | bytes | None) -> Redis:
        slots = self._slots
        if key is None:
            masters = slots.masters()
            if not masters:
                raise RedisConnectionError("no Redis Cluster master is known")
            return slots.client(random.choice(masters))
        address = slots.address(slots.slot(key.decode() if isinstance(key, bytes) else key))
        if address is None:
            raise RedisConnectionError(f"no Redis Cluster master serves {key!r} now")
        return slots.client(address)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self.command(name, args, kwargs)

        return call

    async def command(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """`name(*args, **kwargs)` on the node serving its key, through the slot map's one redirect loop
        (`SlotMap.send`). A node that would not take the command is taken as not sent, so it goes again
        once the map names another node (a replica promoted): the commands sent this way are reads and
        writes that may be repeated (the scripts, which may not, know whether they were sent)."""

        async def run(client: Redis, asking: bool) -> Any:
            try:
                if not asking:
                    return await getattr(client, name)(*args, **kwargs)
                async with client.pipeline(transaction=False) as pipe:
                    pipe.execute_command("ASKING")
                    getattr(pipe, name)(*args, **kwargs)
                    return (await pipe.execute())[1]
            except RedisConnectionError as error:
                raise NotSent(error) from error

        key = _key(name, args)
        if key is None:
            return await getattr(self.client_for(None), name)(*args, **kwargs)
        return await self._slots.send(key, run)

    async def refresh(self) -> None:
        await self._slots.refresh()

    def pipeline(self, transaction: bool = False) -> RoutedPipeline:
        if transaction:
            raise ValueError("a Redis Cluster has no MULTI across nodes; write in an order readers can bear")
        return RoutedPipeline(self)

    async def aclose(self) -> None:
        await self._slots.aclose()


class RoutedPipeline:
    """Commands queued, then sent as one pipeline per node, at once; replies in the order queued."""

    def __init__(self, routed: Routed) -> None:
        self._routed = routed
        self._queued: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    async def __aenter__(self) -> RoutedPipeline:
        return self

    async def __aexit__(self, *_: object) -> None:
        self._queued = []

    def __getattr__(self, name: str) -> Callable[..., RoutedPipeline]:
        def queue(*args: Any, **kwargs: Any) -> RoutedPipeline:
            self._queued.append((name, args, kwargs))
            return self

        return queue

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        groups: dict[int, tuple[Redis, list[int]]] = {}
        for at, (name, args, _) in enumerate(self._queued):
            client = self._routed.client_for(_key(name, args))
            groups.setdefault(id(client), (client, []))[1].append(at)
        replies: list[Any] = [None] * len(self._queued)
        sent = await asyncio.gather(*(self._send(client, ats) for client, ats in groups.values()))
        if any(isinstance(results[0], RedisConnectionError) for results in sent if results):
            # A node that did not answer may have been replaced (a promoted replica): read the map again,
            # so the next command goes where the slot lives now. Nothing is sent again: these commands
            # may have run.
            await self._routed.refresh()
        for (_, ats), results in zip(groups.values(), sent, strict=True):
            for at, result in zip(ats, results, strict=True):
                replies[at] = result
        for at, reply in enumerate(replies):
            # A slot that moved (or is moving) since the map was read: that one command again, where it
            # is now (it did not run).
            if isinstance(reply, AskError | TryAgainError):
                name, args, kwargs = self._queued[at]
                replies[at] = await self._routed.command(name, args, kwargs)
        self._queued = []
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies

    async def _send(self, client: Redis, ats: list[int]) -> list[Any]:
        try:
            async with client.pipeline(transaction=False) as pipe:
                for at in ats:
                    name, args, kwargs = self._queued[at]
                    getattr(pipe, name)(*args, **kwargs)
                return list(await pipe.execute(raise_on_error=False))
        except RedisConnectionError as error:
            # That node is down: its commands fail, the other nodes' answer.
            return [error] * len(ats)
