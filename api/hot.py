"""The hot routes (ping, ack, result) over a plain `HotRequest`, so the FastAPI routes and the fast lane
(`api.fastlane`) run the same code: caller, receipt, one script, the metrics."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from fastapi import Request

from api.auth import WORKSPACE_HEADER, hot_caller
from api.deps import canonical_id
from api.keyed import CALL_RECEIPT_MS, PING_RECEIPT_MS, idempotency_key
from api.schemas.clients import ClientCallProgressBody, ClientCallResultBody
from api.state import AppState
from broker.errors import InvalidRequest
from broker.services.clients import Receipt
from broker.services.credentials import Permission
from broker.services.idempotency import fingerprint, scope_digest

MANAGE = Permission.SESSION_MANAGE
# Names the pool member acking a call; the registration's call stream announces it (api.pool_stream).
POOL_MEMBER_HEADER = "Switchboard-Pool-Member"
_MEMBER = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Every header a hot route reads (lower case), so the fast lane copies exactly these out of the scope.
HOT_HEADERS = frozenset(
    {"authorization", "idempotency-key", WORKSPACE_HEADER, "content-type", POOL_MEMBER_HEADER.lower()}
)


@dataclass(frozen=True, slots=True)
class HotRequest:
    """What a hot route reads of its request. `headers` answers lower-case names."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    @classmethod
    async def of(cls, request: Request) -> HotRequest:
        return cls(request.method, request.url.path, request.headers, await request.body())


def receipt_of(state: AppState, request: HotRequest, session_id: str, identity: str, ttl_ms: int) -> Receipt | None:
    """Where the request's Idempotency-Key receipt goes (the route's script reads and writes it in the
    same step as the operation), or None when the request carries no key."""
    key = idempotency_key(request.headers)
    if key is None:
        return None
    digest = scope_digest(identity, request.method, request.path, key)
    return state.broker.clients.receipt(
        session_id, digest, fingerprint(request.method, request.path, request.body), ttl_ms
    )


async def ping(state: AppState, request: HotRequest, session_id: str, client_id: str) -> str:
    canonical, who = await hot_caller(state.broker, request.headers, session_id, MANAGE)
    receipt = receipt_of(state, request, canonical, who.identity, PING_RECEIPT_MS)
    return await state.broker.clients.ping(canonical, canonical_id(client_id, "client"), who.caller, receipt)


def pool_member(headers: Mapping[str, str]) -> str:
    """The pool member an ack comes from (`POOL_MEMBER_HEADER`, as its call stream named it), or ''."""
    member = headers.get(POOL_MEMBER_HEADER.lower(), "")
    if member and not _MEMBER.fullmatch(member):
        raise InvalidRequest(f"{POOL_MEMBER_HEADER}: must be the member name its call stream gave, not {member!r}")
    return member


async def ack(state: AppState, request: HotRequest, session_id: str, client_id: str, call_id: str) -> str:
    canonical, who = await hot_caller(state.broker, request.headers, session_id, MANAGE)
    member = pool_member(request.headers)
    receipt = receipt_of(state, request, canonical, who.identity, CALL_RECEIPT_MS)
    cid = canonical_id(client_id, "client")
    reply = await state.broker.clients.ack(canonical, cid, call_id, who.caller, receipt, member)
    state.metrics.acked.inc()
    return reply


async def progress(
    state: AppState, request: HotRequest, session_id: str, client_id: str, call_id: str, body: ClientCallProgressBody
) -> str:
    canonical, who = await hot_caller(state.broker, request.headers, session_id, MANAGE)
    receipt = receipt_of(state, request, canonical, who.identity, CALL_RECEIPT_MS)
    cid = canonical_id(client_id, "client")
    return await state.broker.clients.progress(
        canonical, cid, call_id, body.message, body.fraction, who.caller, receipt
    )


async def answer(
    state: AppState, request: HotRequest, session_id: str, client_id: str, call_id: str, body: ClientCallResultBody
) -> None:
    canonical, who = await hot_caller(state.broker, request.headers, session_id, MANAGE)
    receipt = receipt_of(state, request, canonical, who.identity, CALL_RECEIPT_MS)
    await state.broker.clients.answer(
        canonical,
        canonical_id(client_id, "client"),
        call_id,
        body.result(),
        is_error=bool(body.is_error),
        caller=who.caller,
        receipt=receipt,
        structured=body.structured,
    )
    state.metrics.answered.inc()
