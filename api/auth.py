"""Who is calling: an API key (its permissions) or a session token (its one session), from the header."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from fastapi import Request

from api.state import broker_of
from broker import Broker
from broker.errors import Forbidden, NotFound, Unauthorized
from broker.services.clients import Caller
from broker.services.credentials import API_KEY_PREFIX, SESSION_TOKEN_PREFIX, Permission, TokenState, token_session
from common.codec import canonical_uuid, sha256_hex

WORKSPACE_HEADER = "kikuvi-workspace"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. `session_id` is set for a session token: the only session it reaches.
    An API key's `expires_at` (ms) and `ancestors` (the keys it was minted under) bound what it mints."""

    kind: Literal["api_key", "session_token"]
    id: str
    label: str
    permissions: frozenset[str]
    session_id: str | None = None
    session_gone: bool = False
    expires_at: int | None = None
    ancestors: tuple[str, ...] = ()

    def require(self, permission: Permission) -> None:
        """An API key holding `permission`; a session token never reaches a route that asks for one."""
        if self.kind == "session_token":
            raise Forbidden("this route needs an API key; a session token reaches only its own session's routes")
        if permission not in self.permissions:
            raise Forbidden(f"this API key lacks the permission {permission}")

    def reach_session(self, session_id: str, permission: Permission) -> str:
        """The canonical session id, if this caller may act on it with `permission`."""
        canonical = canonical_uuid(session_id)
        if canonical is None:
            raise NotFound(f"no session {session_id}")
        if self.kind == "session_token":
            # Another session's routes answer as if it did not exist.
            if canonical != self.session_id or self.session_gone:
                raise NotFound(f"no session {session_id}")
            return canonical
        self.require(permission)
        return canonical


def bearer_token(header: str | None) -> str | None:
    """The credential an `Authorization` value carries, as authentication reads it (the scheme in any
    case, the token without surrounding whitespace), or None when it carries none. The rate limits key
    on this too, so padding a header cannot make a credential look new."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def _bearer(headers: Mapping[str, str]) -> str:
    header = headers.get("authorization")
    if not header:
        raise Unauthorized("missing credential: send `Authorization: Bearer <API key or session token>`")
    token = bearer_token(header)
    if token is None:
        raise Unauthorized("malformed Authorization header: expected `Bearer <API key or session token>`")
    return token


@dataclass(frozen=True, slots=True)
class HotCaller:
    """The caller of a hot route (ack, result, ping): a session token, checked by the route's own script,
    or an API key checked here. `identity` scopes its Idempotency-Keys."""

    caller: Caller
    identity: str


async def hot_caller(
    broker: Broker, headers: Mapping[str, str], session_id: str, permission: Permission
) -> tuple[str, HotCaller]:
    """The canonical session id and the caller, with no Redis round trip for a session token: the token
    names its session, and the script checks the token itself in the same step as the operation."""
    token = _bearer(headers)
    if not token.startswith(SESSION_TOKEN_PREFIX):
        principal = await principal_of(broker, headers)
        return principal.reach_session(session_id, permission), HotCaller(Caller(), principal.id)
    canonical = canonical_uuid(session_id)
    named, caller = _session_token(token)
    if canonical is None or named != canonical:
        # A token that names another session (or none) learns nothing about this one.
        raise NotFound(f"no session {session_id}")
    _check_workspace(headers, broker.workspace_id)
    return canonical, caller


# Session tokens recently seen on the hot routes: a browser sends the same one on every ack, result and
# ping, and parsing its session and hashing it cost about as much as the rest of the route's Python.
@lru_cache(maxsize=4096)
def _session_token(token: str) -> tuple[str | None, HotCaller]:
    """The session a session token names, and the caller it is (its SHA-256, which its script checks)."""
    digest = sha256_hex(token)
    return token_session(token), HotCaller(Caller(digest), f"token:{digest}")


def _check_workspace(headers: Mapping[str, str], workspace_id: str) -> None:
    workspace = headers.get(WORKSPACE_HEADER)
    if workspace is not None and canonical_uuid(workspace.strip()) != workspace_id:
        raise Forbidden(f"this credential belongs to workspace {workspace_id}, not {workspace}")


async def authenticate(request: Request) -> Principal:
    """The caller of this request, or 401 (no, unknown, revoked or expired credential) / 403 (workspace)."""
    return await principal_of(broker_of(request), request.headers)


async def principal_of(broker: Broker, headers: Mapping[str, str]) -> Principal:
    """The caller that `headers` name (see `authenticate`)."""
    token = _bearer(headers)
    principal: Principal
    if token.startswith(API_KEY_PREFIX):
        key = await broker.credentials.authenticate_key(token)
        if key is None:
            raise Unauthorized("this API key is unknown, revoked or expired")
        principal = Principal(
            "api_key", key.key_id, key.label, key.permissions, expires_at=key.expires_at, ancestors=key.ancestors
        )
    elif token.startswith(SESSION_TOKEN_PREFIX):
        auth = await broker.credentials.authenticate_token(token)
        if auth.state is TokenState.UNKNOWN:
            raise Unauthorized("this session token is unknown or expired")
        gone = auth.state is TokenState.SESSION_GONE
        principal = Principal("session_token", auth.token_id, "", frozenset(), auth.session_id, gone)
    else:
        raise Unauthorized("unrecognised credential: expected an API key (swb_ak_...) or a session token (swb_st_...)")
    _check_workspace(headers, broker.workspace_id)
    return principal
