"""Pending MCP sign-ins: what a grant's OAuth flow left waiting for the person's browser, found by the
`state` the authorization server hands back to the callback. A state is drawn at random and stored only
as its SHA-256; it is bound to its session, works once, and runs out with the wait
(`SWITCHBOARD_MCP_AUTHORIZATION_TIMEOUT_S`). A taken, expired or unknown one is refused saying which.

A step that needs a sign-in waits for it without a worker (`wait`): the run is `waiting`, as on an approval,
until the sign-in completes (`complete`), is declined (`decline`) or runs out (`expire`, from its timer in
the deadlines index); the last of those the step waits on queues it again for any worker."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.keys import SIGN_IN_DEADLINE, KeySpace
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


@dataclass(frozen=True, slots=True)
class LatestSignIn:
    """A grant's latest sign-in in its session: its id, its state (as `McpAuthorizations.asked` says it),
    and the run that last waited on it ('' for none)."""

    authorization_id: str
    state: str
    run_id: str


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
            {
                **run_args,
                "authorization_id": authorization_id,
                "grant": grant,
                "server_url": server_url,
                "member": KeySpace.sign_in_deadline(session_id, authorization_id),
            },
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

    async def asked(self, session_id: str, grant: str) -> LatestSignIn | None:
        """The grant's latest sign-in in the session (its state `pending`, `completed`, `declined`, or
        `expired`, and the run that waited on it), None when none was asked for."""
        key = self._core.keys.session(session_id).mcp_authorizations
        with translate_redis_errors():
            latest = await self._core.redis.hget(key, f"g:{grant}")
            if latest is None:
                return None
            raw = await self._core.redis.hget(key, latest.decode())
        if raw is None:
            return None
        record = json.loads(raw)
        return LatestSignIn(latest.decode(), _state(record), str(record.get("wait") or ""))

    async def run_of(self, session_id: str, authorization_id: str) -> str | None:
        """The run that asked for the sign-in (None: none was active, or no such sign-in)."""
        if authorization_id.startswith("g:"):
            return None
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._core.keys.session(session_id).mcp_authorizations, authorization_id)
        run = None if raw is None else json.loads(raw).get("run")
        return run if isinstance(run, str) and run else None

    async def wait(
        self, session_id: str, run_id: str, step: int, attempt: int, authorization_ids: Sequence[str], gone_text: str
    ) -> Literal["waiting", "queued", "cancelled", "stale"]:
        """The step (try `attempt`) waits for these sign-ins, held by no worker: 'waiting'; 'queued' when each
        ended already (the step goes again at once); 'cancelled' (a cancel came: the run ended); 'stale' (the
        step is not this try's)."""
        keys = self._core.keys
        run_keys, run_args = run_names(keys, session_id, run_id)
        try:
            (outcome,) = await self._core.scripts.run(
                "wait_mcp_authorization",
                {**run_keys, "authorizations": keys.session(session_id).mcp_authorizations},
                {
                    **run_args,
                    "step": step,
                    "attempt": attempt,
                    "gone_text": gone_text,
                    "prefix": SIGN_IN_DEADLINE,
                    "ids": list(authorization_ids),
                },
                partition=keys.session(session_id).partition,
            )
        except NotFound:
            return "stale"
        found = str(outcome)
        return "waiting" if found == "waiting" else "queued" if found == "queued" else _ended(found)

    async def expire(self, session_id: str, authorization_id: str) -> str:
        """End the sign-in as run out if its timer is due and it still waits ('expired'); 'not_due',
        'settled' (nothing to do), or 'unknown' (the session holds no such sign-in: the member is a call's)."""
        keys = self._core.keys
        run_keys, run_args = run_names(keys, session_id, "")
        (outcome,) = await self._core.scripts.run(
            "expire_mcp_authorization",
            {**run_keys, "authorizations": keys.session(session_id).mcp_authorizations},
            {
                **run_args,
                "authorization_id": authorization_id,
                "member": KeySpace.sign_in_deadline(session_id, authorization_id),
            },
            partition=keys.session(session_id).partition,
        )
        return str(outcome)

    async def state(self, session_id: str, authorization_id: str) -> str | None:
        """The sign-in's state in its session (as `asked` says it), None when the session has no record of it."""
        if authorization_id.startswith("g:"):
            return None
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._core.keys.session(session_id).mcp_authorizations, authorization_id)
        return None if raw is None else _state(json.loads(raw))

    async def decline(self, session_id: str, authorization_id: str) -> str:
        """The person declines the sign-in: its grant is not asked for again in the session, and a run
        waiting on it goes on without it; the grant's name. NotFound (no such sign-in in the session),
        Conflict (it ended already, or the session is full)."""
        keys = self._core.keys
        run_keys, run_args = run_names(keys, session_id, "")
        (grant,) = await self._core.scripts.run(
            "decline_mcp_authorization",
            {**run_keys, "authorizations": keys.session(session_id).mcp_authorizations},
            {
                **run_args,
                "authorization_id": authorization_id,
                "member": KeySpace.sign_in_deadline(session_id, authorization_id),
            },
            partition=keys.session(session_id).partition,
        )
        return str(grant)


def sign_in_deadline(call_id: str) -> str | None:
    """The sign-in whose end a deadlines index member names, by what follows the session in it (its `call
    id`); None for a call's."""
    return call_id.removeprefix(SIGN_IN_DEADLINE) if call_id.startswith(SIGN_IN_DEADLINE) else None


def _ended(outcome: str) -> Literal["cancelled", "stale"]:
    return "cancelled" if outcome == "cancelled" else "stale"


def _state(record: dict[str, object]) -> str:
    state = str(record["state"])
    if state == "pending" and int(str(record["expires_at"])) <= time.time() * 1000:
        return "expired"
    return state
