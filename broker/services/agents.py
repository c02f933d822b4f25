"""Agents, their published versions and their security document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.services.pages import id_page, records
from broker.transport import aio
from common.codec import dumps, loads, now_ms


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    name: str
    created_at: int
    live_version: str | None
    allowed_origins: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AgentVersion:
    id: str
    agent_id: str
    config: dict[str, Any]
    model_provider_id: str
    version: int
    created_at: int
    # Write-only: the MCP grants' credentials by grant name ({"headers": {...}}), never rendered.
    secrets: dict[str, Any] = field(default_factory=dict, repr=False)


class Agents:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def create(self, name: str, agent_id: str) -> Agent:
        """Create (or, for an id already created by a retried request, return) an agent."""
        keys = self._core.keys
        record: aio.Fields = {"id": agent_id, "name": name, "created_at": now_ms(), "versions": 0}
        # No MULTI (a Redis Cluster client has none): the record comes first and the index after it, and
        # a retry writes the index again, so a write cut short leaves nothing a reader trips on.
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                if not await self._core.redis.hexists(keys.agent(agent_id), "created_at"):
                    pipe.hset(keys.agent(agent_id), mapping=record)
                pipe.zadd(keys.agents, {agent_id: 0})
                await pipe.execute()
        return await self.get(agent_id)

    async def get(self, agent_id: str) -> Agent:
        with translate_redis_errors():
            record = await self._core.redis.hgetall(self._core.keys.agent(agent_id))
        if not record or record.get(b"deleted") == b"1" or b"created_at" not in record:
            raise NotFound(f"no agent {agent_id}")
        return _agent(record)

    async def session_origins(self, session_id: str) -> frozenset[str]:
        """The browser origins the agent of a session allows (none for a session that does not exist)."""
        keys = self._core.keys
        with translate_redis_errors():
            agent_id = await self._core.redis.hget(keys.session(session_id).meta, "agent_id")
            if agent_id is None:
                return frozenset()
            raw = await self._core.redis.hget(keys.agent(agent_id.decode()), "allowed_origins")
        return frozenset(loads(raw)) if raw else frozenset()

    async def page(self, *, limit: int, after: str | None, ascending: bool) -> tuple[list[Agent], str | None]:
        page = await id_page(self._core.redis, self._core.keys.agents, limit=limit, after=after, ascending=ascending)
        found = await records(self._core.redis, [self._core.keys.agent(agent_id) for agent_id in page.ids])
        agents = [_agent(r) for r in found if r and r.get(b"deleted") != b"1" and b"created_at" in r]
        return agents, page.next_cursor

    async def rename(self, agent_id: str, name: str) -> Agent:
        await self.get(agent_id)
        with translate_redis_errors():
            await self._core.redis.hset(self._core.keys.agent(agent_id), "name", name)
        return await self.get(agent_id)

    async def mark_deleted(self, agent_id: str) -> list[str]:
        """Tombstone the agent (no new session can start on it) and return its sessions to delete."""
        await self.get(agent_id)
        keys = self._core.keys
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.hset(keys.agent(agent_id), "deleted", "1")
                pipe.zrem(keys.agents, agent_id)
                pipe.smembers(keys.agent_sessions(agent_id))
                _, _, sessions = await pipe.execute()
        return sorted(bytes(s).decode() for s in sessions)

    async def purge(self, agent_id: str) -> None:
        """Drop the tombstoned agent's versions and records, once its sessions are deleted."""
        keys = self._core.keys
        with translate_redis_errors():
            versions = await self._core.redis.zrange(keys.agent_versions(agent_id), 0, -1)
            await self._core.redis.unlink(
                *(keys.version(bytes(v).decode()) for v in versions),
                keys.agent_versions(agent_id),
                keys.agent_sessions(agent_id),
                keys.agent(agent_id),
            )

    async def publish(
        self,
        agent_id: str,
        version_id: str,
        config: dict[str, Any],
        provider_id: str,
        secrets: dict[str, Any] | None = None,
    ) -> AgentVersion:
        keys = self._core.keys
        await self._core.scripts.run(
            "publish_version",
            {
                "agent": keys.agent(agent_id),
                "versions": keys.agent_versions(agent_id),
                "version": keys.version(version_id),
            },
            {
                "agent_id": agent_id,
                "version_id": version_id,
                "config": dumps(config),
                "provider_id": provider_id,
                "created_at": now_ms(),
                "secrets": dumps(secrets) if secrets else "",
            },
        )
        return await self.version(version_id)

    async def version(self, version_id: str) -> AgentVersion:
        with translate_redis_errors():
            record = await self._core.redis.hgetall(self._core.keys.version(version_id))
        if not record:
            raise NotFound(f"no agent version {version_id}")
        return _version(record)

    async def versions(
        self, agent_id: str, *, limit: int, after: str | None, ascending: bool
    ) -> tuple[list[AgentVersion], str | None]:
        await self.get(agent_id)
        index = self._core.keys.agent_versions(agent_id)
        page = await id_page(self._core.redis, index, limit=limit, after=after, ascending=ascending)
        found = await records(self._core.redis, [self._core.keys.version(version_id) for version_id in page.ids])
        return [_version(r) for r in found if r], page.next_cursor

    async def set_security(self, agent_id: str, allowed_origins: list[str]) -> Agent:
        await self.get(agent_id)
        with translate_redis_errors():
            await self._core.redis.hset(self._core.keys.agent(agent_id), "allowed_origins", dumps(allowed_origins))
        return await self.get(agent_id)


def _agent(record: dict[bytes, bytes]) -> Agent:
    live = record.get(b"live_version")
    return Agent(
        id=record[b"id"].decode(),
        name=record[b"name"].decode(),
        created_at=int(record[b"created_at"]),
        live_version=live.decode() if live else None,
        allowed_origins=tuple(loads(record.get(b"allowed_origins", b"[]"))),
    )


def _version(record: dict[bytes, bytes]) -> AgentVersion:
    return AgentVersion(
        id=record[b"id"].decode(),
        agent_id=record[b"agent_id"].decode(),
        config=loads(record[b"config"]),
        model_provider_id=record[b"model_provider_id"].decode(),
        version=int(record[b"version"]),
        created_at=int(record[b"created_at"]),
        secrets=loads(record[b"secrets"]) if record.get(b"secrets") else {},
    )
