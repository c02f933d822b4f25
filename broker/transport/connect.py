"""Connecting to Redis: one Redis, or a Redis Cluster behind the same URL, found by asking the server."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError

from broker.errors import translate_redis_errors
from broker.transport.client import create_redis
from broker.transport.routed import Routed
from broker.transport.slots import SlotMap


async def _as_sent(message: Any) -> Any:
    """A pub/sub message as Redis pushed it. redis-py's own handler formats every message into a debug
    line (a repr of the whole event) before logging drops it."""
    return message


@dataclass
class Connected:
    """The client a process uses: `redis` serves every command (on a Cluster, `broker.routed.Routed`, which
    sends each to the master of its key's slot); `slots` is the Cluster's slot map, None for one Redis."""

    redis: Redis
    slots: SlotMap | None
    name: str

    def pubsub(self) -> PubSub:
        """A pub/sub connection. Classic pub/sub reaches every node of a Cluster, so any master serves; a
        random one each time, so a subscriber whose node died comes back on a live one."""
        client = self.redis if self.slots is None else self.slots.client(random.choice(self.slots.masters()))
        return client.pubsub(push_handler_func=_as_sent)

    async def aclose(self) -> None:
        await self.redis.aclose()


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
        return Connected(single, None, name)
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
    # Routed answers the command methods of a one-node client; typed as one, so the broker's services
    # need not tell the two apart (scripts and pub/sub do, through `slots`).
    return Connected(cast(Redis, Routed(slots)), slots, name)
