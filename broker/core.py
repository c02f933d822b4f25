"""The broker's shared handles: one Redis client, the scripts, the key space and the settings."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from broker.client import create_redis
from broker.codec import uuid7
from broker.errors import BrokerUnavailable, translate_redis_errors
from broker.keys import KeySpace
from broker.partitions import PARTITIONS
from broker.scripts import Scripts
from broker.settings import Settings


@dataclass
class Core:
    """What every broker service holds; built once per process by `Core.connect`."""

    settings: Settings
    redis: Redis
    scripts: Scripts
    keys: KeySpace
    workspace_id: str

    @classmethod
    async def connect(cls, settings: Settings, url: str, role: str = "switchboard") -> Core:
        """Open the client, load every script and read (or fix, on first start) the workspace id. `role`
        names the connections (`switchboard-api`, `switchboard-worker`) in Redis's CLIENT LIST."""
        redis = create_redis(url, name=role, max_connections=settings.redis_max_connections)
        keys = KeySpace(settings.key_prefix)
        scripts = Scripts(redis)
        try:
            await scripts.load()
            with translate_redis_errors():
                await redis.set(keys.workspace, uuid7(), nx=True)
                await redis.set(keys.partition_count, PARTITIONS, nx=True)
                workspace = await redis.get(keys.workspace)
                partitions = int(await redis.get(keys.partition_count) or PARTITIONS)
            if partitions != PARTITIONS:
                raise BrokerUnavailable(
                    f"this deployment's data is laid out in {partitions} partitions and this build uses "
                    f"{PARTITIONS}; run the build the deployment was created with"
                )
        except BaseException:
            await redis.aclose()
            raise
        return cls(settings, redis, scripts, keys, bytes(workspace).decode())

    async def close(self) -> None:
        await self.redis.aclose()
