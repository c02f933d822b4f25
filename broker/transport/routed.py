"""The Cluster's route for the broker's commands (broker/transport/commands.py): each command goes to the
master of its key's slot on that node's own pool, and a pipeline is split by node.

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
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import AskError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError

from broker.transport.commands import Queued
from broker.transport.slots import NotSent, SlotMap

T = TypeVar("T")


class SlotRoute:
    """Each command to the master serving its key's slot (keyless ones to any master)."""

    def __init__(self, slots: SlotMap) -> None:
        self._slots = slots

    def client_for(self, key: str | None) -> Redis:
        slots = self._slots
        if key is None:
            masters = slots.masters()
            if not masters:
                raise RedisConnectionError("no Redis Cluster master is known")
            return slots.client(random.choice(masters))
        address = slots.address(slots.slot(key))
        if address is None:
            raise RedisConnectionError(f"no Redis Cluster master serves {key!r} now")
        return slots.client(address)

    async def run(self, key: str | None, call: Callable[[Redis], Awaitable[T]]) -> T:
        """`call` on the node serving `key`, through the slot map's one redirect loop (`SlotMap.send`). A
        node that would not take the command is taken as not sent, so it goes again once the map names
        another node (a replica promoted): the commands sent this way are reads and writes that may be
        repeated (the scripts, which may not, know whether they were sent)."""
        if key is None:
            return await call(self.client_for(None))

        async def attempt(client: Redis, asking: bool) -> T:
            try:
                if not asking:
                    return await call(client)
                async with client.pipeline(transaction=False) as pipe:
                    pipe.execute_command("ASKING")
                    call(pipe)  # queued (see Queued)
                    answered: T = (await pipe.execute())[1]
                    return answered
            except RedisConnectionError as error:
                raise NotSent(error) from error

        return await self._slots.send(key, attempt)

    async def batch(self, queued: list[Queued]) -> list[Any]:
        groups: dict[int, tuple[Redis, list[int]]] = {}
        for at, command in enumerate(queued):
            client = self.client_for(command.key)
            groups.setdefault(id(client), (client, []))[1].append(at)
        replies: list[Any] = [None] * len(queued)
        sent = await asyncio.gather(*(_send(client, [queued[at] for at in ats]) for client, ats in groups.values()))
        if any(isinstance(results[0], RedisConnectionError) for results in sent if results):
            # A node that did not answer may have been replaced (a promoted replica): read the map again,
            # so the next command goes where the slot lives now. Nothing is sent again: these commands
            # may have run.
            await self._slots.refresh()
        for (_, ats), results in zip(groups.values(), sent, strict=True):
            for at, result in zip(ats, results, strict=True):
                replies[at] = result
        for at, reply in enumerate(replies):
            # A slot that moved (or is moving) since the map was read: that one command again, where it
            # is now (it did not run).
            if isinstance(reply, AskError | TryAgainError):
                replies[at] = await self.run(queued[at].key, queued[at].call)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies


async def _send(client: Redis, queued: list[Queued]) -> list[Any]:
    try:
        async with client.pipeline(transaction=False) as pipe:
            for command in queued:
                command.call(pipe)
            return list(await pipe.execute(raise_on_error=False))
    except RedisConnectionError as error:
        # That node is down: its commands fail, the other nodes' answer.
        return [error] * len(queued)
