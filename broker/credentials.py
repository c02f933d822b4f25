"""API keys and session tokens: minted here, stored only as SHA-256 hashes, looked up in one round trip."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any

from broker import aio
from broker.codec import dumps, loads, now_ms, sha256_hex, uuid7
from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.pages import id_page, records
from broker.settings import API_KEY_PREFIX, SESSION_TOKEN_PREFIX


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


@dataclass(frozen=True, slots=True)
class KeyAuth:
    key_id: str
    label: str
    permissions: frozenset[str]


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


def _opt_int(value: bytes | None) -> int | None:
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
    record = dumps({"id": token_id, "expires_at": expires_at})
    return SessionToken(token, token_id, expires_at, sha256_hex(token), record)


class Credentials:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def mint_api_key(
        self, label: str, permissions: list[str], expires_at: int | None, *, secret: str | None = None
    ) -> tuple[ApiKey, str]:
        """A new key and its secret (shown once). `secret` fixes it (the bootstrap key); else it is random."""
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
        }
        auth: aio.Fields = {
            "id": key.id,
            "label": label,
            "permissions": record["permissions"],
            "expires_at": record["expires_at"],
        }
        with translate_redis_errors():
            # The secret's lookup last: a key works only once its record and index entry are written.
            async with self._core.redis.pipeline(transaction=False) as pipe:
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
        """The key behind a secret, or None when it is unknown, revoked or expired."""
        with translate_redis_errors():
            record = aio.record(await self._core.redis.hgetall(self._core.keys.api_key_secret(sha256_hex(secret))))
        if not record or record.get(b"revoked") == b"1":
            return None
        now = now_ms()
        expires = _opt_int(record.get(b"expires_at"))
        if expires is not None and expires <= now:
            return None
        key_id = record[b"id"].decode()
        last = _opt_int(record.get(b"last_used_at"))
        if last is None or now - last > _LAST_USED_EVERY_MS:
            with translate_redis_errors():
                async with self._core.redis.pipeline(transaction=False) as pipe:
                    pipe.hset(self._core.keys.api_key_secret(sha256_hex(secret)), "last_used_at", str(now))
                    pipe.hset(self._core.keys.api_key(key_id), "last_used_at", str(now))
                    await pipe.execute()
        permissions = frozenset(loads(record[b"permissions"]))
        return KeyAuth(key_id, record[b"label"].decode(), permissions)

    async def authenticate_token(self, token: str) -> TokenAuth:
        session_id = token_session(token)
        if session_id is None:
            return TokenAuth(TokenState.UNKNOWN)
        keys = self._core.keys.session(session_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline(transaction=False) as pipe:
                pipe.hget(keys.tokens, sha256_hex(token))
                pipe.hget(keys.meta, "deleted")
                raw, deleted = await pipe.execute()
        if raw is None:
            return TokenAuth(TokenState.UNKNOWN)
        record = loads(raw)
        if record["expires_at"] <= now_ms():
            return TokenAuth(TokenState.UNKNOWN)
        state = TokenState.SESSION_GONE if deleted == b"1" else TokenState.VALID
        return TokenAuth(state, session_id, record["id"])

    async def get_api_key(self, key_id: str) -> ApiKey:
        with translate_redis_errors():
            record = aio.record(await self._core.redis.hgetall(self._core.keys.api_key(key_id)))
        if not record:
            raise NotFound(f"no API key {key_id}")
        return _api_key(record)

    async def list_api_keys(self, *, limit: int, after: str | None, ascending: bool) -> tuple[list[ApiKey], str | None]:
        page = await id_page(self._core.redis, self._core.keys.api_keys, limit=limit, after=after, ascending=ascending)
        found = await records(self._core.redis, [self._core.keys.api_key(key_id) for key_id in page.ids])
        return [_api_key(record) for record in found if record], page.next_cursor

    async def revoke_api_key(self, key_id: str) -> ApiKey:
        keys = self._core.keys
        with translate_redis_errors():
            record = aio.record(await self._core.redis.hgetall(keys.api_key(key_id)))
            if not record:
                raise NotFound(f"no API key {key_id}")
            if not record.get(b"revoked_at"):
                now = now_ms()
                # The lookup authentication reads first: once it is written the key works no more; the
                # record follows (a retry writes both again).
                async with self._core.redis.pipeline(transaction=False) as pipe:
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
    )
