"""Pending MCP sign-ins: what a grant's OAuth flow left waiting for the person's browser, found by the
`state` the authorization server hands back to the callback. A state is drawn at random and stored only
as its SHA-256; it is bound to its session, works once, and runs out with the wait
(`SWITCHBOARD_MCP_AUTHORIZATION_TIMEOUT_S`). A taken, expired or unknown one is refused saying which."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import asdict, dataclass

from broker.core import Core
from broker.errors import translate_redis_errors
from broker.scripts.layouts import run_names
from broker.services.token_cipher import TokenCipher

# A lapsed sign-in's tombstone lives this much past its wait, so its link is refused as run out (or used)
# rather than unknown.
_TOMBSTONE_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class PendingAuthorization:
    """A sign-in taken by its state: whose, for which grant and server, and the flow's sealed part."""

    authorization_id: str
    session_id: str
    grant: str
    server_url: str
    expires_at_ms: int
    flow: str


@dataclass(frozen=True, slots=True)
class AuthorizationFlow:
    """What the callback needs to finish a sign-in the worker began, kept sealed in the pending record
    (the `mcp` package's OAuthClientProvider keeps these in its own process's memory while it waits, and
    our callback may arrive in another process, days later). `metadata` is the authorization server's
    metadata (RFC 8414) as the worker read it, `client` the client information it picked (a metadata
    document URL, pre-registered credentials or a dynamic registration), both as the `mcp` package's
    models dump them."""

    metadata: dict[str, object]
    client: dict[str, object]
    code_verifier: str
    redirect_uri: str
    resource: str
    scope: str | None
    subject: str | None

    def seal(self, cipher: TokenCipher, authorization_id: str) -> str:
        return cipher.seal(json.dumps(asdict(self)).encode(), _bound(authorization_id))

    @classmethod
    def open(cls, cipher: TokenCipher, sealed: str, authorization_id: str) -> AuthorizationFlow:
        return cls(**json.loads(cipher.open(sealed, _bound(authorization_id))))


def _bound(authorization_id: str) -> str:
    # Apart from the connections' ids (UUIDs), so a sealed flow never opens as a token set.
    return f"flow|{authorization_id}"


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


class McpAuthorizations:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def begin(
        self, *, authorization_id: str, session_id: str, grant: str, server_url: str, flow: str, wait_s: int
    ) -> tuple[str, int]:
        """A new state for this sign-in and when it runs out (ms). `flow` is what the callback needs to
        finish the exchange, sealed by the caller."""
        state = secrets.token_urlsafe(32)
        fields = {
            "authorization_id": authorization_id,
            "session_id": session_id,
            "grant": grant,
            "server_url": server_url,
            "flow": flow,
        }
        (expires_at,) = await self._core.scripts.run(
            "begin_mcp_authorization",
            {"authorization": self._core.keys.mcp_authorization(_digest(state))},
            {"fields": json.dumps(fields), "wait_ms": wait_s * 1000, "keep_ms": _TOMBSTONE_MS},
        )
        return state, int(expires_at)

    async def take(self, state: str) -> PendingAuthorization:
        """The sign-in `state` names, once; an unknown, used or expired state: InvalidRequest saying which."""
        data = await self._core.scripts.run(
            "take_mcp_authorization", {"authorization": self._core.keys.mcp_authorization(_digest(state))}, {}
        )
        found = {str(data[i]): str(data[i + 1]) for i in range(0, len(data), 2)}
        return PendingAuthorization(
            authorization_id=found["authorization_id"],
            session_id=found["session_id"],
            grant=found["grant"],
            server_url=found["server_url"],
            expires_at_ms=int(found["expires_at"]),
            flow=found["flow"],
        )

    async def complete(self, session_id: str, authorization_id: str, grant: str, server_url: str) -> str:
        """Append `mcp_authorization_completed` to the session (the tokens are kept already); its JSON.
        NotFound when the session is gone, Conflict when it has no room."""
        keys = self._core.keys
        run_keys, run_args = run_names(keys, session_id, "")
        (event,) = await self._core.scripts.run(
            "complete_mcp_authorization",
            {**run_keys, "authorizations": keys.session(session_id).mcp_authorizations},
            {**run_args, "authorization_id": authorization_id, "grant": grant, "server_url": server_url},
            partition=keys.session(session_id).partition,
        )
        return str(event)

    async def require(
        self, session_id: str, *, authorization_id: str, grant: str, server_url: str, url: str, expires_at_ms: int
    ) -> tuple[str, str]:
        """Ask the session's person to sign in (`mcp_authorization_required`) unless the grant's latest
        sign-in still waits or was declined: ('asked', the event JSON), else ('waiting' | 'declined', its id)."""
        keys = self._core.keys
        run_keys, run_args = run_names(keys, session_id, "")
        outcome, found = await self._core.scripts.run(
            "require_mcp_authorization",
            {**run_keys, "authorizations": keys.session(session_id).mcp_authorizations},
            {
                **run_args,
                "authorization_id": authorization_id,
                "grant": grant,
                "server_url": server_url,
                "url": url,
                "expires_at": expires_at_ms,
            },
            partition=keys.session(session_id).partition,
        )
        return str(outcome), str(found)

    async def asked(self, session_id: str, grant: str) -> str | None:
        """The state of the grant's latest sign-in in the session (`pending`, `completed`, `declined`, or
        `expired`), None when none was asked for."""
        key = self._core.keys.session(session_id).mcp_authorizations
        with translate_redis_errors():
            latest = await self._core.redis.hget(key, f"g:{grant}")
            raw = None if latest is None else await self._core.redis.hget(key, latest.decode())
        return None if raw is None else _state(json.loads(raw))

    async def state(self, session_id: str, authorization_id: str) -> str | None:
        """The sign-in's state in its session (as `asked` says it), None when the session has no record of it."""
        if authorization_id.startswith("g:"):
            return None
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._core.keys.session(session_id).mcp_authorizations, authorization_id)
        return None if raw is None else _state(json.loads(raw))

    async def decline(self, session_id: str, authorization_id: str) -> str:
        """The person declines the sign-in: its grant is not asked for again in the session; the grant's
        name. NotFound (no such sign-in in the session), Conflict (it ended already)."""
        keys = self._core.keys
        run_keys, run_args = run_names(keys, session_id, "")
        (grant,) = await self._core.scripts.run(
            "decline_mcp_authorization",
            {**run_keys, "authorizations": keys.session(session_id).mcp_authorizations},
            {**run_args, "authorization_id": authorization_id},
            partition=keys.session(session_id).partition,
        )
        return str(grant)


def _state(record: dict[str, object]) -> str:
    state = str(record["state"])
    if state == "pending" and int(str(record["expires_at"])) <= time.time() * 1000:
        return "expired"
    return state
