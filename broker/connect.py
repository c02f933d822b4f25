"""Connecting to Redis: one Redis, or a Redis Cluster behind the same URL, found by asking the server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.client import PubSub

from broker.client import create_redis
from broker.errors import translate_redis_errors
from broker.slots import SlotMap


@dataclass
class Connected:
    """The client a process uses: `redis` serves every command (for a Cluster it is redis-py's cluster
    client, which routes each command by its key's slot); `cluster` is that same client when the server is
    a Cluster, else None."""

    redis: Redis
    cluster: RedisCluster | None
    name: str
    slots: SlotMap | None = None
    _subscribers: dict[str, Redis] = field(default_factory=dict)

    def pubsub(self) -> PubSub:
        """A pub/sub connection. Classic pub/sub reaches every node of a Cluster, so any node serves; a
        random one each time, so a subscriber whose node died comes back on a live one."""
        if self.cluster is None:
            return self.redis.pubsub()
        node = self.cluster.get_random_node()
        client = self._subscribers.get(node.name)
        if client is None:
            kwargs = self.cluster.get_connection_kwargs()
            client = Redis(
                host=node.host,
                port=int(node.port),
                username=kwargs.get("username"),
                password=kwargs.get("password"),
                client_name=self.name,
            )
            self._subscribers[node.name] = client
        return client.pubsub()

    async def aclose(self) -> None:
        for client in self._subscribers.values():
            await client.aclose()
        self._subscribers.clear()
        if self.slots is not None:
            await self.slots.aclose()
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
    cluster = RedisCluster.from_url(
        url,
        client_name=name,
        decode_responses=False,
        max_connections=max_connections,
        socket_keepalive=True,
        # Partitions on a live master keep working while another master's slots are uncovered.
        require_full_coverage=False,
    )
    try:
        with translate_redis_errors():
            await cluster.initialize()
    except BaseException:
        await cluster.aclose()
        raise
    host, port = cluster.get_default_node().host, cluster.get_default_node().port
    slots = SlotMap(name, max_connections, password=cluster.get_connection_kwargs().get("password"))
    slots.username = cluster.get_connection_kwargs().get("username")
    await slots.refresh([f"{host}:{port}"])
    # redis-py's cluster client answers the same command methods as its single-node client; typed as one,
    # so the broker's services need not tell them apart (pub/sub and scripts do, through `Connected`).
    return Connected(cast(Redis, cluster), cluster, name, slots)
