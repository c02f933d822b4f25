"""Routes the SDK sends an Idempotency-Key on run through `keyed`: one attempt acts, repeats replay it.

The receipt lives in the slot of what the route acts on (the session's, else the workspace's) and
remembers the ids the first attempt chose, so an attempt that takes over from one that died creates
nothing twice. Receipts last `SWITCHBOARD_IDEMPOTENCY_TTL_S`, except those of pings (5 minutes) and of
acks and results (1 hour): those operations are idempotent on their own beyond that.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response

from api.auth import Principal
from api.errors import STATUS, envelope, outcome_of, status_of
from api.state import broker_of
from broker import Broker
from broker.errors import InvalidRequest, SwitchboardError
from broker.services.idempotency import Replay, fingerprint, scope_digest
from common.codec import dumps

PING_RECEIPT_MS = 5 * 60 * 1000
CALL_RECEIPT_MS = 60 * 60 * 1000
MAX_KEY_LENGTH = 255
# Visible ASCII, spaces only inside. HTTP takes space around a header's value for padding, which clients
# cannot send and servers drop, so it is dropped here too before the check.
IDEMPOTENCY_KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


@dataclass(frozen=True, slots=True)
class Answer:
    """A response, and for the three creates that return a secret, the receipt a replay answers with."""

    status: int
    body: bytes = b""
    receipt_status: int | None = None
    receipt_body: bytes | None = None


def idempotency_key(headers: Mapping[str, str]) -> str | None:
    """The request's Idempotency-Key, None when it sends none; 400 when it is not 1 to 255 visible ASCII
    characters (spaces only between them), as the OpenAPI document states (`IDEMPOTENCY_KEY_PATTERN`)."""
    key = headers.get("idempotency-key")
    if key is None:
        return None
    key = key.strip(" \t")
    if len(key) > MAX_KEY_LENGTH or _IDEMPOTENCY_KEY.fullmatch(key) is None:
        raise InvalidRequest(
            f"Idempotency-Key: must be 1 to {MAX_KEY_LENGTH} visible ASCII characters (spaces only between them)"
        )
    return key


def respond(status: int, body: bytes | str) -> Response:
    if status == 204:
        return Response(status_code=204)
    return Response(body, status_code=status, media_type="application/json")


@dataclass(frozen=True, slots=True)
class Keyed:
    """What the act receives: the ids the first attempt chose, and the key's identity (or '')."""

    seed: dict[str, Any]
    tag: str


async def keyed(
    request: Request,
    principal: Principal,
    act: Callable[[Keyed], Awaitable[Answer]],
    *,
    seed: dict[str, Any],
    session_id: str | None = None,
    ttl_ms: int | None = None,
) -> Response:
    key = idempotency_key(request.headers)
    if key is None:
        outcome = await act(Keyed(seed, ""))
        return respond(outcome.status, outcome.body)
    status, body = await keyed_as(
        broker_of(request),
        principal.id,
        Attempt(request.method, request.url.path, key, await request.body()),
        act,
        seed=seed,
        session_id=session_id,
        ttl_ms=ttl_ms,
    )
    return respond(status, body)


@dataclass(frozen=True, slots=True)
class Attempt:
    """What a receipt is scoped to (method, path, key) and what a repeat must match (`body`)."""

    method: str
    path: str
    key: str
    body: bytes


async def keyed_as(
    broker: Broker,
    principal_id: str,
    attempt: Attempt,
    act: Callable[[Keyed], Awaitable[Answer]],
    *,
    seed: dict[str, Any],
    session_id: str | None = None,
    ttl_ms: int | None = None,
) -> tuple[int, bytes]:
    """One attempt acts under the receipt of `attempt`; a repeat gets the first one's status and body (a
    front door keys its input by the frontend's message id this way)."""
    digest = scope_digest(principal_id, attempt.method, attempt.path, attempt.key)
    ttl = ttl_ms or broker.settings.idempotency_ttl_ms
    claimed = await broker.idempotency.begin(
        digest, fingerprint(attempt.method, attempt.path, attempt.body), seed, ttl, session_id
    )
    if isinstance(claimed, Replay):
        return status_of(claimed.outcome), claimed.body.encode()
    try:
        outcome = await act(Keyed(claimed.seed, digest))
    except SwitchboardError as error:
        status = STATUS[error.code]
        if 400 <= status < 500 and status != 429:
            # A refusal is the answer to this request too: a retry with the same key gets the same one.
            await broker.idempotency.finish(claimed, error.code, dumps(envelope(error.code, error.message)))
        else:
            await broker.idempotency.release(claimed)
        raise
    except BaseException:
        await broker.idempotency.release(claimed)
        raise
    stored_status = outcome.receipt_status or outcome.status
    stored_body = outcome.receipt_body if outcome.receipt_body is not None else outcome.body
    await broker.idempotency.finish(claimed, outcome_of(stored_status), stored_body.decode())
    return outcome.status, outcome.body
