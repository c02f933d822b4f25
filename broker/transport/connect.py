"""Connecting to Redis: one Redis, or a Redis Cluster behind the same URL, found by asking the server."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError

from broker.errors import RedisUnreachable, translate_redis_errors
from broker.transport.client import create_redis
from broker.transport.commands import Commands, OneRedis
from broker.transport.routed import SlotRoute
from broker.transport.slots import SlotMap


async def _as_sent(message: Any) -> Any:
    """A pub/sub message as Redis pushed it. redis-py's own handler formats every message into a debug
    line (a repr of the whole event) before logging drops it."""
    return message


@dataclass
class Connected:
    """The client a process uses: `commands` serves every command the services send besides their scripts
    (on a Cluster each to the master of its key's slot); `nodes` is the one Redis's client, or the Cluster's
    slot map with a client per node."""

    commands: Commands
    nodes: Redis | SlotMap
    name: str

    @property
    def slots(self) -> SlotMap | None:
        """The Cluster's slot map, None for one Redis."""
        return self.nodes if isinstance(self.nodes, SlotMap) else None

    def client_for(self, key: str) -> Redis:
        """The client of the node serving `key` (the one client, for one Redis): commands sent through it
        reach that node alone, so a node that is down fails only what it holds."""
        nodes = self.nodes
        if isinstance(nodes, Redis):
            return nodes
        address = nodes.address(nodes.slot(key))
        if address is None:
            raise RedisUnreachable(f"no Redis node serves {key} now; retry shortly")
        return nodes.client(address)

    def masters(self) -> list[Redis]:
        """A client of every master as last read (the one client, for one Redis)."""
        return masters(self.nodes)

    def pubsub(self) -> PubSub:
        """A pub/sub connection. Classic pub/sub reaches every node of a Cluster, so any master serves; a
        random one each time, so a subscriber whose node died comes back on a live one."""
        nodes = self.nodes
        client = nodes if isinstance(nodes, Redis) else nodes.client(random.choice(nodes.masters()))
        return client.pubsub(push_handler_func=_as_sent)

    async def aclose(self) -> None:
        await self.nodes.aclose()


def masters(nodes: Redis | SlotMap) -> list[Redis]:
    """A client of every master of `nodes` as last read."""
    if isinstance(nodes, Redis):
        return [nodes]
    return [nodes.client(address) for address in nodes.masters()]


async def open_redis(url: str, *, name: str = "switchboard", max_connections: int = 16) -> Connected:
    """The client for the server at `url`: a Redis Cluster when that server says `cluster_enabled:1`
    (any node's address will do), else one Redis. Nothing to configure for either."""
    single = create_redis(url, name=name, max_connections=max_connections)
    try:
        with translate_redis_errors():
            info = await single.info("cluster")
    except BaseException:
        await single.aclose()
        raise
    if not int(info.get("cluster_enabled", 0)):
        return Connected(Commands(OneRedis(single)), single, name)
    await single.aclose()
    parts = urlsplit(url)
    slots = SlotMap(name, max_connections, url)
    try:
        with translate_redis_errors():
            await slots.refresh([f"{parts.hostname}:{parts.port or 6379}"])
            if not slots.masters():
                raise RedisConnectionError(f"no Redis Cluster node at {parts.hostname}:{parts.port} answered")
    except BaseException:
        await slots.aclose()
        raise
    # The services send the same commands on either kind (scripts and pub/sub tell them apart by `nodes`).
    return Connected(Commands(SlotRoute(slots)), slots, name)
