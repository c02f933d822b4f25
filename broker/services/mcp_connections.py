"""MCP grants' OAuth connections: the tokens one sign-in got for one server, kept for their owner (the
session's subject when it has one, so one sign-in serves all of that person's sessions, else the session;
never an agent or the workspace), sealed at rest (broker/services/token_cipher.py) and never listed.

A connection's id is derived from its owner and server URL, so signing in again replaces the tokens of
the connection it had, and a forgotten one comes back under the same id."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.services.pages import id_page, records
from broker.services.token_cipher import TokenCipher

_IDS = uuid.UUID("4f0b6a4e-3c2d-5e0f-9a41-6d2b1c7e8f90")


def owner_of(subject: str | None, session_id: str) -> str:
    """Whose tokens a session's steps use: its subject's, else its own."""
    return f"u:{subject}" if subject else f"s:{session_id}"


def connection_id(owner: str, server_url: str) -> str:
    return str(uuid.uuid5(_IDS, f"{owner}\n{server_url}"))


@dataclass(frozen=True, slots=True)
class McpConnection:
    """What may be shown of a connection: no token."""

    id: str
    owner: str
    grant: str
    server_url: str
    subject: str | None
    session_id: str | None
    scopes: tuple[str, ...]
    expires_at_ms: int | None
    created_at_ms: int


def _connection(found: dict[bytes, bytes]) -> McpConnection:
    text = {name.decode(): value.decode() for name, value in found.items() if name != b"tokens"}
    return McpConnection(
        id=text["id"],
        owner=text["owner"],
        grant=text["grant"],
        server_url=text["server_url"],
        subject=text["subject"] or None,
        session_id=text["session_id"] or None,
        scopes=tuple(json.loads(text["scopes"])),
        expires_at_ms=int(text["expires_at"]) if text["expires_at"] else None,
        created_at_ms=int(text["created_at"]),
    )


class McpConnections:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def keep(
        self,
        cipher: TokenCipher,
        *,
        subject: str | None,
        session_id: str,
        grant: str,
        server_url: str,
        scopes: list[str],
        expires_at_ms: int | None,
        tokens: bytes,
    ) -> McpConnection:
        """Store (or replace) the tokens `session_id`'s owner got from `server_url`, sealed."""
        owner = owner_of(subject, session_id)
        cid = connection_id(owner, server_url)
        fields = {
            "owner": owner,
            "grant": grant,
            "server_url": server_url,
            # A subject's connection serves all of the subject's sessions: it names none of them.
            "subject": subject or "",
            "session_id": "" if subject else session_id,
            "scopes": json.dumps(scopes),
            "expires_at": "" if expires_at_ms is None else str(expires_at_ms),
            "tokens": cipher.seal(tokens, cid),
        }
        keys = self._core.keys
        await self._core.scripts.run(
            "keep_mcp_connection",
            {"connection": keys.mcp_connection(cid), "index": keys.mcp_connections(owner)},
            {"id": cid, "fields": json.dumps(fields)},
        )
        return await self.get(cid)

    async def tokens(self, cipher: TokenCipher, owner: str, server_url: str) -> bytes | None:
        """The tokens `owner` has for `server_url`, opened; None when it has none."""
        cid = connection_id(owner, server_url)
        with translate_redis_errors():
            sealed = await self._core.redis.hget(self._core.keys.mcp_connection(cid), "tokens")
        return None if sealed is None else cipher.open(sealed.decode(), cid)

    async def get(self, cid: str) -> McpConnection:
        with translate_redis_errors():
            found = await self._core.redis.hgetall(self._core.keys.mcp_connection(cid))
        if b"id" not in found:
            raise NotFound(f"no MCP connection {cid}")
        return _connection(found)

    async def get_for(self, owner: str, server_url: str) -> McpConnection | None:
        """`owner`'s connection to `server_url`, if it has one."""
        try:
            return await self.get(connection_id(owner, server_url))
        except NotFound:
            return None

    async def page(
        self, owner: str, *, limit: int, after: str | None, ascending: bool
    ) -> tuple[list[McpConnection], str | None]:
        keys = self._core.keys
        page = await id_page(
            self._core.redis, keys.mcp_connections(owner), limit=limit, after=after, ascending=ascending
        )
        found = await records(self._core.redis, [keys.mcp_connection(cid) for cid in page.ids])
        return [_connection(r) for r in found if b"id" in r], page.next_cursor

    async def forget(self, cid: str) -> None:
        owner = (await self.get(cid)).owner
        keys = self._core.keys
        await self._core.scripts.run(
            "forget_mcp_connection",
            {"connection": keys.mcp_connection(cid), "index": keys.mcp_connections(owner)},
            {"id": cid, "owner": owner},
        )
