"""Idempotency-Key receipts: one attempt acts, repeats replay its answer, another body is a conflict."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from dataclasses import dataclass
from typing import Any

from broker.core import Core
from broker.errors import BrokerUnavailable, Conflict, translate_redis_errors
from common.codec import dumps, loads, sha256_hex


@dataclass(frozen=True, slots=True)
class Replay:
    """The first attempt's answer, kept under the key: how it ended (`outcome`, as its caller named it when
    it finished: `Idempotency.finish`) and its body. A receipt written by a release before outcomes holds
    the number its caller gave then."""

    outcome: str
    body: str


@dataclass(frozen=True, slots=True)
class Claim:
    """The right to act under a key; `seed` holds the values the first attempt chose (its ids)."""

    key: str
    attempt: str
    seed: dict[str, Any]
    ttl_ms: int
    meta: str | None = None
    """The session's meta hash when this is a session route's receipt (it counts toward its storage)."""


def scope_digest(credential_id: str, method: str, path: str, key: str) -> str:
    """Keys are scoped per credential, method and path (docs/http-api.md, Idempotency)."""
    return sha256_hex(f"{credential_id}\n{method}\n{path}\n{key}")


def fingerprint(method: str, path: str, body: bytes) -> str:
    return sha256_hex(method.encode() + b"\n" + path.encode() + b"\n" + body)


class Idempotency:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def begin(
        self, digest: str, fingerprint: str, seed: dict[str, Any], ttl_ms: int, session_id: str | None = None
    ) -> Claim | Replay:
        """Claim the key scoped by `digest` (`scope_digest`), or return the first attempt's receipt; waits
        while another attempt acts. The receipt lives in the slot of `session_id`'s session (it counts
        toward its storage: Conflict when that is full), else in the workspace's."""
        keys = self._core.keys
        session = keys.session(session_id) if session_id else None
        key = session.idempotency(digest) if session else keys.workspace_idempotency(digest)
        meta = session.meta if session else None
        attempt = secrets.token_hex(8)
        lease_ms = round(self._core.settings.idempotency_wait_s * 1000)
        deadline = asyncio.get_running_loop().time() + self._core.settings.idempotency_wait_s
        pause = 0.005
        while True:
            reply = await self._core.scripts.run(
                "idem_begin",
                {"receipt": key, "session_meta": [] if meta is None else [meta]},
                {
                    "fp": fingerprint,
                    "attempt": attempt,
                    "lease_ms": lease_ms,
                    "seed": dumps(seed),
                    "ttl_ms": ttl_ms,
                    "max_bytes": self._core.settings.max_session_bytes,
                },
            )
            verdict = reply[0]
            if verdict == "run":
                return Claim(key, attempt, loads(reply[1]), ttl_ms, meta)
            if verdict == "replay":
                return Replay(str(reply[1]), str(reply[2]))
            if asyncio.get_running_loop().time() > deadline:
                raise Conflict("a request with this Idempotency-Key is still being processed; retry later")
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)

    async def kept(self, digest: str, session_id: str) -> bool:
        """Whether the key scoped by `digest` has a receipt in `session_id`'s slot (an attempt acted, or is
        acting, under it: `begin` will replay its answer), read without claiming anything."""
        with translate_redis_errors():
            return bool(await self._core.redis.exists(self._core.keys.session(session_id).idempotency(digest)))

    async def finish(self, claim: Claim, outcome: str, body: str) -> None:
        """Keep the answer under the key: how it ended, as the caller names outcomes, and its body."""
        if not outcome:
            raise ValueError("an answer needs its outcome; release() lets the next attempt act instead")
        await self._core.scripts.run(
            "idem_finish",
            self._keys(claim),
            {"attempt": claim.attempt, "outcome": outcome, "body": body, "ttl_ms": claim.ttl_ms},
        )

    @staticmethod
    def _keys(claim: Claim) -> dict[str, str | list[str]]:
        """idem_finish's keys: the receipt, and the session's meta for a session route's receipt."""
        return {"receipt": claim.key, "session_meta": [] if claim.meta is None else [claim.meta]}

    async def release(self, claim: Claim) -> None:
        """Let the next attempt act again (this one failed in a way a retry may mend)."""
        # Should this fail, the lease runs out by itself and the next attempt takes over.
        with contextlib.suppress(BrokerUnavailable):
            await self._core.scripts.run(
                "idem_finish", self._keys(claim), {"attempt": claim.attempt, "outcome": "", "body": "", "ttl_ms": 0}
            )
