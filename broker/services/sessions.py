"""Sessions: create on an agent's live version, read, list, delete, and mint more tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.scripts.layouts import run_names
from broker.services.credentials import SessionToken, new_session_token
from broker.services.inbox import Inbox
from broker.services.pages import id_page
from common.codec import dumps, loads

RUN_GONE_DELETED = "the session was deleted before the client answered"
# What is left of a session purged for lack of use, for the purge that follows (ms).
RETENTION_TOMBSTONE_MS = 60_000
# The member of a partition's purge index that checks a session's retention, not a deleted session.
RETAIN_PREFIX = "r|"
# How the record stores an API key creator: `created_by` is this and the key's id, its label goes in
# `created_by_label`. As JSON in one field it was longer than hash-max-listpack-value (64 bytes), which
# turned the whole record from a listpack into a hash table, some 0.8 KiB a session more.
API_KEY_CREATOR = "api_key:"


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    agent_id: str
    agent_version_id: str
    display_name: str
    created_by: dict[str, Any]
    workspace_id: str
    created_at: int
    active: bool
    # The operator's id for the session's end user (an extension), when it was created with one.
    subject: str | None = None


class Sessions:
    def __init__(self, core: Core, inbox: Inbox) -> None:
        self._core = core
        self._inbox = inbox

    def new_token(self, session_id: str) -> SessionToken:
        return new_session_token(session_id, self._core.settings.session_token_ttl_ms)

    async def create(
        self,
        session_id: str,
        *,
        agent_id: str,
        version_id: str,
        display_name: str,
        created_by: dict[str, Any],
        token: SessionToken,
        policy: str = "steer",
        debounce_ms: int = 750,
        subject: str | None = None,
    ) -> tuple[Session, bool]:
        """Create the session with its first token; False when this id already existed (a retry).

        The caller read the agent for its live version (`version_id`). The workspace's indexes live in
        another slot than the session, so they are written first: a reader of them skips an id whose
        session does not exist (yet, or any more)."""
        keys = self._core.keys
        s = keys.session(session_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.zadd(keys.sessions, {session_id: 0})
                pipe.sadd(keys.agent_sessions(agent_id), session_id)
                await pipe.execute()
        created, _ = await self._core.scripts.run(
            "create_session",
            {"meta": s.meta, "events": s.events, "tokens": s.tokens},
            {
                "channel": s.live,
                "sid": session_id,
                "agent_id": agent_id,
                "version_id": version_id,
                "display_name": display_name,
                **_stored_creator(created_by),
                "workspace_id": self._core.workspace_id,
                "token_hash": token.digest,
                "token": token.record,
                "policy": policy,
                "debounce_ms": debounce_ms,
                "retention_ms": self._core.settings.session_retention_ms,
                "settled_ms": self._core.settings.settled_call_retention_ms,
                "subject": subject or "",
            },
            partition=s.partition,
        )
        return await self.get(session_id), created == "created"

    async def get(self, session_id: str) -> Session:
        s = self._core.keys.session(session_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.hgetall(s.meta)
                pipe.exists(s.run)
                record, active = await pipe.execute()
        session = _session(record, bool(active))
        if session is None:
            raise NotFound(f"no session {session_id}")
        return session

    async def exists(self, session_id: str) -> bool:
        s = self._core.keys.session(session_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.exists(s.meta)
                pipe.hget(s.meta, "deleted")
                present, deleted = await pipe.execute()
        return bool(present) and deleted != b"1"

    async def page(self, *, limit: int, after: str | None, ascending: bool) -> tuple[list[Session], str | None]:
        keys = self._core.keys
        page = await id_page(self._core.redis, keys.sessions, limit=limit, after=after, ascending=ascending)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                for session_id in page.ids:
                    pipe.hgetall(keys.session(session_id).meta)
                    pipe.exists(keys.session(session_id).run)
                replies = await pipe.execute()
        sessions = [_session(replies[i], bool(replies[i + 1])) for i in range(0, len(replies), 2)]
        return [s for s in sessions if s is not None], page.next_cursor

    async def delete(self, session_id: str) -> tuple[Session, str | None]:
        """Delete the session, then take it out of the workspace's indexes (another slot: a reader skips
        a deleted session, and the purge takes it out again should this process die in between). The
        session as it was, and the id of the active run it ended (None for none)."""
        keys = self._core.keys
        session = await self.get(session_id)
        s = keys.session(session_id)
        run_keys, run_args = run_names(keys, session_id, "")
        (ended,) = await self._core.scripts.run(
            "delete_session",
            {**run_keys, "tokens": s.tokens, "session_schedules": s.schedules},
            {**run_args, "tombstone_ms": self._core.settings.session_token_ttl_ms, "gone_text": RUN_GONE_DELETED},
            partition=s.partition,
        )
        await self._unlist(session_id, session.agent_id)
        return session, str(ended) if ended else None

    async def _unlist(self, session_id: str, agent_id: str | None) -> None:
        keys = self._core.keys
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.zrem(keys.sessions, session_id)
                if agent_id:
                    pipe.srem(keys.agent_sessions(agent_id), session_id)
                await pipe.execute()
        # The inbox lives in the workspace's slot too; so does what it remembers of the session's calls.
        await self._inbox.forget(session_id)

    async def retain(self, session_id: str) -> str:
        """Check a session whose retention timer came due: 'kept' (in use: its timer moves on), 'purged'
        (deleted; the purge index takes the rest), or 'gone'."""
        keys = self._core.keys
        s = keys.session(session_id)
        settings = self._core.settings
        # Long enough for the purge, due at once, to read the agent from the record.
        tombstone_ms = max(1, min(RETENTION_TOMBSTONE_MS, settings.session_retention_ms))
        run_keys, run_args = run_names(keys, session_id, "")
        (outcome,) = await self._core.scripts.run(
            "retain_session",
            {**run_keys, "tokens": s.tokens, "session_schedules": s.schedules},
            {
                **run_args,
                "retention_ms": settings.session_retention_ms,
                "tombstone_ms": tombstone_ms,
                "gone_text": RUN_GONE_DELETED,
            },
            partition=s.partition,
        )
        return str(outcome)

    async def purge(self, session_id: str, batch: int = 300) -> None:
        """Drop a deleted session's per-client keys (the timekeeper calls this), a batch per round trip, and
        its input requests."""
        keys = self._core.keys
        s = keys.session(session_id)
        with translate_redis_errors():
            agent_id = await self._core.redis.hget(s.meta, "agent_id")
            while True:
                raw = await self._core.redis.srandmember(s.clients, batch)
                client_ids = [bytes(c).decode() for c in raw]
                if not client_ids:
                    break
                doomed = [k for cid in client_ids for k in (s.client(cid), s.client_calls(cid))]
                async with self._core.redis.pipeline() as pipe:
                    pipe.unlink(*doomed)
                    pipe.srem(s.clients, *client_ids)
                    await pipe.execute()
            # The input requests outlive no session, but no script that deletes one holds their hash.
            await self._core.redis.unlink(s.inputs, s.mcp_authorizations)
        await self._unlist(session_id, bytes(agent_id).decode() if agent_id else None)
        with translate_redis_errors():
            await self._core.redis.zrem(s.partition.purges, session_id)

    async def mint_token(self, session_id: str) -> SessionToken:
        token = self.new_token(session_id)
        s = self._core.keys.session(session_id)
        await self._core.scripts.run(
            "mint_token",
            {"meta": s.meta, "tokens": s.tokens},
            {"sid": session_id, "token_hash": token.digest, "token": token.record},
        )
        return token


def _session(record: dict[bytes, bytes], active: bool) -> Session | None:
    if not record or record.get(b"deleted") == b"1" or b"created_at" not in record:
        return None
    return Session(
        id=record[b"id"].decode(),
        agent_id=record[b"agent_id"].decode(),
        agent_version_id=record[b"agent_version_id"].decode(),
        display_name=record[b"display_name"].decode(),
        created_by=_creator(record),
        workspace_id=record[b"workspace_id"].decode(),
        created_at=int(record[b"created_at"]),
        active=active,
        subject=record[b"subject"].decode() if b"subject" in record else None,
    )


def _stored_creator(created_by: dict[str, Any]) -> dict[str, str]:
    """The record's fields for `created_by` (the create script's args): an API key's compact, anything
    else as JSON."""
    if created_by.keys() == {"type", "api_key_id", "label"} and created_by["type"] == "api_key":
        return {"created_by": API_KEY_CREATOR + created_by["api_key_id"], "created_by_label": created_by["label"]}
    return {"created_by": dumps(created_by), "created_by_label": ""}


def _creator(record: dict[bytes, bytes]) -> dict[str, Any]:
    """`created_by` as it was given: records written before the compact form hold JSON."""
    stored = record[b"created_by"].decode()
    if stored.startswith(API_KEY_CREATOR):
        label = record.get(b"created_by_label", b"").decode()
        return {"type": "api_key", "api_key_id": stored.removeprefix(API_KEY_CREATOR), "label": label}
    return dict(loads(stored))
