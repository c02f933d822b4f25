"""The broker's shared handles: one Redis client, the scripts, the key space and the settings."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Generic

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from typing_extensions import TypeVar

from broker.errors import BrokerUnavailable, RedisUnreachable, translate_redis_errors
from broker.keys import KeySpace
from broker.partitions import PARTITIONS
from broker.scripts.runner import Scripts
from broker.settings import BrokerSettings
from broker.transport import aio
from broker.transport.commands import Commands
from broker.transport.connect import Connected, open_redis
from broker.transport.slots import SlotMap
from common.codec import uuid7

T = TypeVar("T")
# The settings of the process's role (a subclass of BrokerSettings): the services read the broker's alone
# (a bare `Core` is `Core[BrokerSettings]`); the API's and a worker's facades carry their role's.
S = TypeVar("S", bound=BrokerSettings, default=BrokerSettings, covariant=True)
R = TypeVar("R", bound=BrokerSettings)


@dataclass
class Core(Generic[S]):
    """What every broker service holds; built once per process by `Core.connect`."""

    settings: S
    connected: Connected
    scripts: Scripts
    keys: KeySpace
    workspace_id: str

    @property
    def redis(self) -> Commands:
        """The commands the services send besides their scripts, on one Redis or a Cluster alike."""
        return self.connected.commands

    @property
    def slots(self) -> SlotMap | None:
        """The Cluster's slot map when Redis is a Cluster, else None."""
        return self.connected.slots

    def pubsub(self) -> PubSub:
        return self.connected.pubsub()

    def client_for(self, key: str) -> Redis:
        """The client of the node serving `key` (the one client, for one Redis): commands sent through it
        reach that node alone, so a node that is down fails only what it holds."""
        return self.connected.client_for(key)

    def node_of(self, partition: int) -> str:
        """The address of the node serving `partition` as last read ('' for one Redis; 'unserved' when no
        node serves its slot): what a worker backs off by."""
        slots = self.connected.slots
        if slots is None:
            return ""
        return slots.address(slots.slot(self.keys.partition(partition).alarm)) or "unserved"

    async def read_by_node(
        self, partitions: Iterable[int], read: Callable[[Redis, list[int]], Awaitable[T]]
    ) -> list[tuple[list[int], T | BrokerUnavailable]]:
        """`read(client, numbers)` once per node, for the partitions that node serves, all at once: a
        reader sends one pipeline per node, and a node that does not answer costs only its own partitions
        (their group comes back with the BrokerUnavailable it raised; any other error is raised). The
        partitions whose slot no node serves come back as one group with the RedisUnreachable a read of
        that slot would raise, unread."""
        groups: dict[int, tuple[Redis, list[int]]] = {}
        unserved: list[int] = []
        for number in partitions:
            try:
                client = self.client_for(self.keys.partition(number).alarm)
            except RedisUnreachable:
                unserved.append(number)
                continue
            groups.setdefault(id(client), (client, []))[1].append(number)
        done = await asyncio.gather(*(read(*group) for group in groups.values()), return_exceptions=True)
        found: list[tuple[list[int], T | BrokerUnavailable]] = []
        for (_, numbers), result in zip(groups.values(), done, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, BrokerUnavailable):
                raise result
            found.append((numbers, result))
        if unserved:
            found.append((unserved, RedisUnreachable("no Redis node serves these partitions now; retry shortly")))
        return found

    @classmethod
    async def connect(cls, settings: R, url: str, role: str = "switchboard") -> Core[R]:
        """Open the client (one Redis or a Cluster, whichever `url` names), load every script and read
        (or fix, on first start) the workspace id. `role` names the connections (`switchboard-api`,
        `switchboard-worker`) in Redis's CLIENT LIST."""
        connected = await open_redis(url, name=role, max_connections=settings.redis_max_connections)
        redis = connected.commands
        keys = KeySpace(settings.key_prefix)
        scripts = Scripts(connected.nodes, max_session_bytes=settings.max_session_bytes)
        try:
            await scripts.load()
            with translate_redis_errors():
                await redis.set(keys.workspace, uuid7(), nx=True)
                await redis.set(keys.partition_count, PARTITIONS, nx=True)
                workspace = aio.reply(await redis.get(keys.workspace))
                partitions = int(await redis.get(keys.partition_count) or PARTITIONS)
            if partitions != PARTITIONS:
                raise BrokerUnavailable(
                    f"this deployment's data is laid out in {partitions} partitions and this build uses "
                    f"{PARTITIONS}; run the build the deployment was created with"
                )
        except BaseException:
            await connected.aclose()
            raise
        return Core(settings, connected, scripts, keys, (workspace or b"").decode())

    async def close(self) -> None:
        await self.connected.aclose()
