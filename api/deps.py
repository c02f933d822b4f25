"""Dependencies every route shares: the caller, the session it acts on, the page query, path ids in canonical form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Query

from api.auth import Principal, authenticate
from api.schemas.common import DEFAULT_LIMIT, MAX_LIMIT, Order
from api.state import State
from broker.errors import NotFound
from broker.services.credentials import Permission
from common.codec import canonical_uuid

Authenticated = Annotated[Principal, Depends(authenticate)]

# A UUID, with or without its hyphens, or nothing (the first page).
_HEX = "[0-9A-Fa-f]"
CURSOR_PATTERN = f"^(|{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}|{_HEX}{{32}})$"


@dataclass(frozen=True, slots=True)
class PageQuery:
    limit: int
    after: str | None
    ascending: bool


async def page_query(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    after: Annotated[
        str | None,
        Query(
            description="The id of the last item of the previous page (empty: the first page)", pattern=CURSOR_PATTERN
        ),
    ] = None,
    order: Annotated[Order, Query(description="Newest first when omitted")] = "desc",
) -> PageQuery:
    return PageQuery(limit, canonical_uuid(after) if after else None, order == "asc")


Page = Annotated[PageQuery, Depends(page_query)]

# `?include=extensions` on a listing of providers or agent versions: also those of the formats Switchboard
# adds to the Subako enum (openai_chat, gemini), which the Subako SDK cannot read.
Include = Annotated[
    str | None,
    Query(
        max_length=64,
        pattern="^(extensions)?$",
        description="`extensions`: also list providers (or versions) of the formats Switchboard adds"
        " (openai_chat, gemini)",
    ),
]


def extensions_asked(include: str | None) -> bool:
    return include == "extensions"


def canonical_id(value: str, what: str) -> str:
    canonical = canonical_uuid(value)
    if canonical is None:
        raise NotFound(f"no {what} {value}")
    return canonical


def session_for(permission: Permission, *, api_key_only: bool = False) -> Any:
    """A dependency on the path's `session_id`: the canonical id of a live session this caller may act
    on with `permission`, else 404 (403: an API key lacking `permission`). A session token reaches its
    own session, and it was checked against that session when it was read; an API key's session is
    looked up here. `api_key_only`: a session token is refused (403) before the session is looked at.

    As a dependency it answers before the body and the query are validated: a caller that may not
    reach the session learns that (404, 403) whatever it sent, rather than how its request was malformed.
    FastAPI lists a dependency's path parameters after the route's own, so a route with path parameters
    after `session_id` also names `session_id: str` first: the OpenAPI document keeps the path's order."""

    async def session(session_id: str, caller: Authenticated, state: State) -> str:
        if api_key_only:
            caller.require(permission)
        canonical = caller.reach_session(session_id, permission)
        if caller.kind == "api_key" and not await state.broker.sessions.exists(canonical):
            raise NotFound(f"no session {session_id}")
        return canonical

    return Depends(session)


ReadSession = Annotated[str, session_for(Permission.SESSION_READ)]
ManagedSession = Annotated[str, session_for(Permission.SESSION_MANAGE)]
# Minting a session's tokens is for API keys: a session token is refused whichever session it names.
KeyManagedSession = Annotated[str, session_for(Permission.SESSION_MANAGE, api_key_only=True)]
