"""The broker's shared handles: one Redis client, the scripts, the key space and the settings."""

from __future__ import annotations

from dataclasses import dataclass

from arq.connections import ArqRedis
from redis.asyncio import Redis

from broker.client import create_redis
from broker.codec import job_deserializer, job_serializer, uuid7
from broker.errors import translate_redis_errors
from broker.keys import KeySpace
from broker.scripts import Scripts
from broker.settings import Settings


@dataclass
class Core:
    """What every broker service holds; built once per process by `Core.connect`."""

    settings: Settings
    redis: Redis
    arq: ArqRedis
    scripts: Scripts
    keys: KeySpace
    workspace_id: str

    @classmethod
    async def connect(cls, settings: Settings, url: str, role: str = "switchboard") -> Core:
        """Open the client, load every script and read (or fix, on first start) the workspace id. `role`
        names the connections (`switchboard-api`, `switchboard-worker`) in Redis's CLIENT LIST."""
        redis = create_redis(url, name=role, max_connections=settings.redis_max_connections)
        keys = KeySpace(settings.key_prefix)
        # arq's client shares the pool: enqueueing a job costs no connection of its own.
        arq = ArqRedis(
            connection_pool=redis.connection_pool,
            job_serializer=job_serializer,
            job_deserializer=job_deserializer,
            default_queue_name=keys.queue,
        )
        scripts = Scripts(redis, keys.stats)
        try:
            await scripts.load()
            with translate_redis_errors():
                await redis.set(keys.workspace, uuid7(), nx=True)
                workspace = await redis.get(keys.workspace)
        except BaseException:
            await redis.aclose()
            raise
        return cls(settings, redis, arq, scripts, keys, bytes(workspace).decode())

    async def close(self) -> None:
        await self.redis.aclose()
