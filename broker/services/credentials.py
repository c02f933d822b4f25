"""API keys and session tokens: minted here, stored only as SHA-256 hashes, looked up in one round trip.

A key minted with another key is under it for life: it expires no later than its parent (the API holds
`expires_at` to that) and it records its ancestors, the keys it was minted under, nearest first. Revoking
a key writes its id to the workspace's revoked index, and authentication refuses a key whose own record
or any ancestor's id says revoked, in the same script that reads it (`auth_key.lua`): revoking ends
every key minted under it, transitively, at once. The bootstrap key and keys the CLI mints are roots.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import Any

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.services.pages import id_page, records
from broker.transport import aio
from common.codec import dumps, loads, now_ms, sha256_hex, uuid7

API_KEY_PREFIX = "swb_ak_"
SESSION_TOKEN_PREFIX = "swb_st_"  # noqa: S105 (a marker, not a secret)
_URL_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def looks_like_api_key(value: str) -> bool:
    """Whether `value` has an API key's shape: `swb_ak_` and at least 32 url-safe characters."""
    secret = value.removeprefix(API_KEY_PREFIX)
    return value.startswith(API_KEY_PREFIX) and len(secret) >= 32 and set(secret) <= _URL_SAFE


class Permission(StrEnum):
    """The 15 permissions an API key may hold (the SDK's `KeyPermissionSchema`)."""

    WORKSPACE_READ = "workspace.read"
    AGENT_READ = "agent.read"
    AGENT_PUBLISH = "agent.publish"
    AGENT_DELETE = "agent.delete"
    VAULT_READ = "vault.read"
    VAULT_MANAGE = "vault.manage"
    CREDENTIAL_READ = "credential.read"
    CREDENTIAL_MANAGE = "credential.manage"
    SESSION_CREATE = "session.create"
    SESSION_READ = "session.read"
    SESSION_MANAGE = "session.manage"
    SKILL_READ = "skill.read"
    SKILL_MANAGE = "skill.manage"
    MODEL_PROVIDER_READ = "model_provider.read"
    MODEL_PROVIDER_MANAGE = "model_provider.manage"


PERMISSIONS = tuple(permission.value for permission in Permission)

# last_used_at is a hint, so it is written at most once a minute per key rather than on every request.
_LAST_USED_EVERY_MS = 60_000
# How many keys deep a key may be minted: authentication reads every ancestor, so the chain is bounded.
MAX_KEY_DEPTH = 32


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    label: str
    permissions: tuple[str, ...]
    prefix: str
    created_at: int
    expires_at: int | None
    revoked_at: int | None
    last_used_at: int | None
    created_by: dict[str, Any]
    ancestors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class KeyAuth:
    key_id: str
    label: str
    permissions: frozenset[str]
    expires_at: int | None = None
    ancestors: tuple[str, ...] = ()


class TokenState(Enum):
    VALID = "valid"
    UNKNOWN = "unknown"
    SESSION_GONE = "session_gone"


@dataclass(frozen=True, slots=True)
class TokenAuth:
    state: TokenState
    session_id: str = ""
    token_id: str = ""


@dataclass(frozen=True, slots=True)
class SessionToken:
    token: str
    id: str
    expires_at: int
    digest: str
    record: str


def _opt_int(value: bytes | str | None) -> int | None:
    return int(value) if value else None


def operator_actor(workspace_id: str) -> dict[str, Any]:
    """The one user a self-hosted workspace has: the operator, who holds the bootstrap key."""
    user_id = str(uuid.uuid5(uuid.UUID(workspace_id), "operator"))
    return {"display_name": "Switchboard operator", "primary_email": None, "user_id": user_id}


def token_session(token: str) -> str | None:
    """The session a session token names (it carries the session's id), or None if it names none."""
    session_hex = token[len(SESSION_TOKEN_PREFIX) : len(SESSION_TOKEN_PREFIX) + 32]
    try:
        return str(uuid.UUID(hex=session_hex))
    except ValueError:
        return None


def new_session_token(session_id: str, ttl_ms: int) -> SessionToken:
    """A session token names its session (`swb_st_<session hex><secret>`), so auth needs no global index."""
    token = SESSION_TOKEN_PREFIX + uuid.UUID(session_id).hex + secrets.token_urlsafe(32)
    token_id = uuid7()
    expires_at = now_ms() + ttl_ms
    return SessionToken(token, token_id, expires_at, sha256_hex(token), token_record(token_id, expires_at))


def token_record(token_id: str, expires_at: int) -> str:
    """A session token's stored record, `<expires_at ms> <token id>`: at most 64 bytes, so a session's
    tokens hash stays a listpack (as JSON it was 72, a hash table, some 0.2 KiB a session more). Lua
    reads the expiry as the leading digits (lib/hot.lua, mint_token.lua)."""
    return f"{expires_at} {token_id}"


def token_fields(raw: bytes) -> tuple[str, int]:
    """(token id, expires_at ms) of a stored record; those written before `token_record` hold JSON."""
    text = raw.decode()
    if text.startswith("{"):
        record = loads(text)
        return str(record["id"]), int(record["expires_at"])
    expires_at, token_id = text.split(" ", 1)
    return token_id, int(expires_at)


class Credentials:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def mint_api_key(
        self,
        label: str,
        permissions: list[str],
        expires_at: int | None,
        *,
        secret: str | None = None,
        ancestors: tuple[str, ...] = (),
    ) -> tuple[ApiKey, str]:
        """A new key and its secret (shown once). `secret` fixes it (the bootstrap key); else it is random.
        `ancestors`: the keys it is minted under, nearest first (none for a root)."""
        keys = self._core.keys
        secret = secret or API_KEY_PREFIX + secrets.token_urlsafe(32)
        digest = sha256_hex(secret)
        key = ApiKey(
            id=uuid7(),
            label=label,
            permissions=tuple(dict.fromkeys(permissions)),
            prefix=secret[: len(API_KEY_PREFIX) + 8],
            created_at=now_ms(),
            expires_at=expires_at,
            revoked_at=None,
            last_used_at=None,
            created_by=operator_actor(self._core.workspace_id),
            ancestors=ancestors,
        )
        record: aio.Fields = {
            "id": key.id,
            "label": key.label,
            "permissions": dumps(list(key.permissions)),
            "prefix": key.prefix,
            "created_at": key.created_at,
            "expires_at": "" if key.expires_at is None else key.expires_at,
            "created_by": dumps(key.created_by),
            "secret_sha": digest,
            "ancestors": " ".join(ancestors),
        }
        auth: aio.Fields = {
            "id": key.id,
            "label": label,
            "permissions": record["permissions"],
            "expires_at": record["expires_at"],
            "ancestors": record["ancestors"],
        }
        with translate_redis_errors():
            # The secret's lookup last: a key works only once its record and index entry are written.
            async with self._core.redis.pipeline() as pipe:
                pipe.hset(keys.api_key(key.id), mapping=record)
                pipe.zadd(keys.api_keys, {key.id: 0})
                pipe.hset(keys.api_key_secret(digest), mapping=auth)
                await pipe.execute()
        return key, secret

    async def ensure_api_key(self, secret: str, label: str) -> None:
        """Make `secret` a live key with every permission unless it already is one (the bootstrap key)."""
        with translate_redis_errors():
            known = await self._core.redis.exists(self._core.keys.api_key_secret(sha256_hex(secret)))
        if not known:
            await self.mint_api_key(label, list(PERMISSIONS), None, secret=secret)

    async def authenticate_key(self, secret: str) -> KeyAuth | None:
        """The key behind a secret, or None when it is unknown, revoked (itself or a key it was minted
        under) or expired."""
        keys = self._core.keys
        found = await self._core.scripts.run(
            "auth_key", {"lookup": keys.api_key_secret(sha256_hex(secret)), "revoked": keys.api_keys_revoked}, {}
        )
        if not found:
            return None
        key_id, label, permissions, expires_at, ancestors, last_used = (_text(value) for value in found)
        now = now_ms()
        expires = _opt_int(expires_at)
        if expires is not None and expires <= now:
            return None
        last = _opt_int(last_used)
        if last is None or now - last > _LAST_USED_EVERY_MS:
            with translate_redis_errors():
                async with self._core.redis.pipeline() as pipe:
                    pipe.hset(self._core.keys.api_key_secret(sha256_hex(secret)), "last_used_at", str(now))
                    pipe.hset(self._core.keys.api_key(key_id), "last_used_at", str(now))
                    await pipe.execute()
        return KeyAuth(key_id, label, frozenset(loads(permissions)), expires, tuple(ancestors.split()))

    async def authenticate_token(self, token: str) -> TokenAuth:
        session_id = token_session(token)
        if session_id is None:
            return TokenAuth(TokenState.UNKNOWN)
        keys = self._core.keys.session(session_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.hget(keys.tokens, sha256_hex(token))
                pipe.hget(keys.meta, "deleted")
                raw, deleted = await pipe.execute()
        if raw is None:
            return TokenAuth(TokenState.UNKNOWN)
        token_id, expires_at = token_fields(raw)
        if expires_at <= now_ms():
            return TokenAuth(TokenState.UNKNOWN)
        state = TokenState.SESSION_GONE if deleted == b"1" else TokenState.VALID
        return TokenAuth(state, session_id, token_id)

    async def get_api_key(self, key_id: str) -> ApiKey:
        with translate_redis_errors():
            record = await self._core.redis.hgetall(self._core.keys.api_key(key_id))
        if not record:
            raise NotFound(f"no API key {key_id}")
        return (await self._as_revoked([_api_key(record)]))[0]

    async def list_api_keys(self, *, limit: int, after: str | None, ascending: bool) -> tuple[list[ApiKey], str | None]:
        page = await id_page(self._core.redis, self._core.keys.api_keys, limit=limit, after=after, ascending=ascending)
        found = await records(self._core.redis, [self._core.keys.api_key(key_id) for key_id in page.ids])
        return await self._as_revoked([_api_key(record) for record in found if record]), page.next_cursor

    async def _as_revoked(self, keys: list[ApiKey]) -> list[ApiKey]:
        """`keys`, each shown revoked from when it or the first of its ancestors was: a key ended by its
        parent's revocation reads as revoked, not as a live key that no longer works."""
        ancestors = sorted({ancestor for key in keys for ancestor in key.ancestors})
        if not ancestors:
            return keys
        with translate_redis_errors():
            stamps = await self._core.redis.hmget(self._core.keys.api_keys_revoked, ancestors)
        revoked = {key_id: int(at) for key_id, at in zip(ancestors, stamps, strict=True) if at}
        shown = []
        for key in keys:
            moments = [revoked[a] for a in key.ancestors if a in revoked]
            if key.revoked_at is not None:
                moments.append(key.revoked_at)
            shown.append(replace(key, revoked_at=min(moments)) if moments else key)
        return shown

    async def revoke_api_key(self, key_id: str) -> ApiKey:
        keys = self._core.keys
        with translate_redis_errors():
            record = await self._core.redis.hgetall(keys.api_key(key_id))
            if not record:
                raise NotFound(f"no API key {key_id}")
            if not record.get(b"revoked_at"):
                now = now_ms()
                # What authentication reads first: the revoked index (which ends every key minted under
                # this one) and the key's own lookup; once written, none of them works. The record
                # follows (a retry writes all three again).
                async with self._core.redis.pipeline() as pipe:
                    pipe.hset(keys.api_keys_revoked, key_id, str(now))
                    pipe.hset(keys.api_key_secret(record[b"secret_sha"].decode()), "revoked", "1")
                    pipe.hset(keys.api_key(key_id), "revoked_at", str(now))
                    await pipe.execute()
                record[b"revoked_at"] = str(now).encode()
        return _api_key(record)


def _api_key(record: dict[bytes, bytes]) -> ApiKey:
    return ApiKey(
        id=record[b"id"].decode(),
        label=record[b"label"].decode(),
        permissions=tuple(loads(record[b"permissions"])),
        prefix=record[b"prefix"].decode(),
        created_at=int(record[b"created_at"]),
        expires_at=_opt_int(record.get(b"expires_at")),
        revoked_at=_opt_int(record.get(b"revoked_at")),
        last_used_at=_opt_int(record.get(b"last_used_at")),
        created_by=loads(record[b"created_by"]),
        ancestors=tuple(record.get(b"ancestors", b"").decode().split()),
    )


def _text(value: bytes | str | int | None) -> str:
    if isinstance(value, bytes):
        return value.decode()
    return "" if value is None else str(value)
