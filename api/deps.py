"""Dependencies every route shares: the caller, the page query, path ids in canonical form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query

from api.auth import Principal, authenticate
from api.schemas.common import DEFAULT_LIMIT, MAX_LIMIT, Order
from api.state import AppState
from broker.codec import canonical_uuid
from broker.errors import NotFound

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


def canonical_id(value: str, what: str) -> str:
    canonical = canonical_uuid(value)
    if canonical is None:
        raise NotFound(f"no {what} {value}")
    return canonical


async def existing_session(state: AppState, caller: Principal, session_id: str, permission: str) -> str:
    """The canonical id of a live session this caller may act on with `permission`, else 404."""
    canonical = caller.reach_session(session_id, permission)
    # A session token was checked against its session when it was read; an API key is checked here.
    if caller.kind == "api_key" and not await state.broker.sessions.exists(canonical):
        raise NotFound(f"no session {session_id}")
    return canonical
