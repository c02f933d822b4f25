"""MCP grants' OAuth connections: the tokens one sign-in got for one server, kept for their owner (the
session's subject when it has one, so one sign-in serves all of that person's sessions, else the session;
never an agent or the workspace), sealed at rest (broker/services/token_cipher.py) and never listed.

A connection's id is derived from its owner and server URL, so signing in again replaces the tokens of
the connection it had, and a forgotten one comes back under the same id.

What a refresh needs that was known at sign-in (the token endpoint, the client and how it authenticates,
the resource, the scope: `TokenEndpoint`) is kept sealed beside the tokens, so any worker can refresh them
days later. One refresh at a time per connection (`claim_refresh`, `settle_refresh`)."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from typing import Literal

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
class TokenEndpoint:
    """How a connection's tokens are refreshed: where, as which client (its secret, and the method the
    sign-in used: `client_secret_basic`, `client_secret_post` or `none`), for which resource and scope."""

    url: str
    client_id: str
    client_secret: str | None
    auth_method: str | None
    resource: str
    scope: str | None

    def seal(self, cipher: TokenCipher, cid: str) -> str:
        return cipher.seal(json.dumps(asdict(self)).encode(), _endpoint_bound(cid))

    @classmethod
    def open(cls, cipher: TokenCipher, sealed: str, cid: str) -> TokenEndpoint:
        return cls(**json.loads(cipher.open(sealed, _endpoint_bound(cid))))


def _endpoint_bound(cid: str) -> str:
    # Apart from the tokens' own binding (the bare id), so neither opens as the other.
    return f"endpoint|{cid}"


RefreshOutcome = Literal["keep", "forget", "release"]


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
    # Whether a refresh token's way back (TokenEndpoint) was kept with it, and whether a worker has
    # claimed it to refresh (a claim that ran out included).
    refreshable: bool = False
    refreshing: bool = False


def _connection(found: dict[bytes, bytes]) -> McpConnection:
    text = {name.decode(): value.decode() for name, value in found.items() if name not in (b"tokens", b"endpoint")}
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
        refreshable=bool(found.get(b"endpoint")),
        refreshing=b"refreshing" in found,
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
        endpoint: TokenEndpoint | None = None,
    ) -> McpConnection:
        """Store (or replace) the tokens `session_id`'s owner got from `server_url`, sealed; `endpoint`:
        how to refresh them (sealed too), when they can be."""
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
            "endpoint": "" if endpoint is None else endpoint.seal(cipher, cid),
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

    async def endpoint(self, cipher: TokenCipher, cid: str) -> TokenEndpoint | None:
        """How connection `cid`'s tokens are refreshed, opened; None when that was not kept."""
        with translate_redis_errors():
            sealed = await self._core.redis.hget(self._core.keys.mcp_connection(cid), "endpoint")
        return TokenEndpoint.open(cipher, sealed.decode(), cid) if sealed else None

    async def refused(self, connection: McpConnection) -> bool:
        """Mark `connection`'s access token as ended and not to be refreshed (its server refused it: the
        person signs in again), unless another took its place since `connection` was read; whether it
        was marked."""
        seen = "" if connection.expires_at_ms is None else str(connection.expires_at_ms)
        keys = {"connection": self._core.keys.mcp_connection(connection.id)}
        (answer,) = await self._core.scripts.run("expire_mcp_connection", keys, {"seen": seen})
        return str(answer) == "expired"

    async def claim_refresh(self, cid: str, claim: str, hold_ms: int) -> str:
        """Claim connection `cid` for one refresh: `claimed`, `busy` (another holds it) or `gone`."""
        keys = {"connection": self._core.keys.mcp_connection(cid)}
        (answer,) = await self._core.scripts.run("claim_mcp_refresh", keys, {"claim": claim, "hold_ms": hold_ms})
        return str(answer)

    async def settle_refresh(
        self,
        cipher: TokenCipher,
        connection: McpConnection,
        claim: str,
        outcome: RefreshOutcome,
        *,
        tokens: bytes = b"",
        expires_at_ms: int | None = None,
        scopes: list[str] | None = None,
    ) -> bool:
        """End the refresh `claim` holds: the refreshed tokens kept (`keep`), the connection forgotten
        (`forget`: its refresh token was refused) or the claim let go (`release`). False when the claim
        was lost (a new sign-in, or the claim ran out and another took it): nothing was written."""
        fields: dict[str, str] = {}
        if outcome == "keep":
            fields = {
                "tokens": cipher.seal(tokens, connection.id),
                "expires_at": "" if expires_at_ms is None else str(expires_at_ms),
                "scopes": json.dumps(scopes if scopes is not None else list(connection.scopes)),
            }
        keys = self._core.keys
        (answer,) = await self._core.scripts.run(
            "settle_mcp_refresh",
            {"connection": keys.mcp_connection(connection.id), "index": keys.mcp_connections(connection.owner)},
            {"id": connection.id, "claim": claim, "outcome": outcome, "fields": json.dumps(fields)},
        )
        return str(answer) == "settled"

    async def get(self, cid: str) -> McpConnection:
        with translate_redis_errors():
            found = await self._core.redis.hgetall(self._core.keys.mcp_connection(cid))
        if b"id" not in found:
            raise NotFound(f"no MCP connection {cid}")
        return _connection(found)

    async def with_tokens(
        self, cipher: TokenCipher, owner: str, server_url: str
    ) -> tuple[McpConnection, bytes | None] | None:
        """`owner`'s connection to `server_url` and its tokens, opened, in one read; None when it has none."""
        cid = connection_id(owner, server_url)
        with translate_redis_errors():
            found = await self._core.redis.hgetall(self._core.keys.mcp_connection(cid))
        if b"id" not in found:
            return None
        sealed = found.get(b"tokens")
        return _connection(found), None if sealed is None else cipher.open(sealed.decode(), cid)

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
