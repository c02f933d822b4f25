"""`/v1/mcp/connections`: the OAuth connections MCP grants made for a subject or a session, listed
without their tokens, and forgotten on request (the next step that needs one asks the person again)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from api.deps import Authenticated, Page, canonical_id
from api.schemas.common import ErrorBody, moment, optional_moment
from api.schemas.mcp_connections import McpConnectionBody, McpConnectionPage
from api.schemas.sessions import MAX_SUBJECT_CHARS
from api.state import State
from broker.errors import InvalidRequest
from broker.services.credentials import Permission
from broker.services.mcp_connections import McpConnection, owner_of
from common.codec import canonical_uuid

router = APIRouter(prefix="/v1/mcp/connections", tags=["mcp"], responses={400: {"model": ErrorBody}})


def _body(record: McpConnection) -> McpConnectionBody:
    return McpConnectionBody.model_validate(
        {
            "id": record.id,
            "grant": record.grant,
            "server_url": record.server_url,
            "subject": record.subject,
            "session_id": record.session_id,
            "scopes": list(record.scopes),
            "expires_at": optional_moment(record.expires_at_ms),
            "created_at": moment(record.created_at_ms),
        }
    )


@router.get("", response_model=McpConnectionPage)
async def list_connections(
    caller: Authenticated,
    state: State,
    page: Page,
    subject: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_SUBJECT_CHARS, description="The connections this subject signed in to"),
    ] = None,
    session_id: Annotated[
        str | None,
        Query(max_length=64, description="The connections of this session (one with no subject)"),
    ] = None,
) -> McpConnectionPage:
    """A subject's (or a session's) connections: which grant's server, what scopes, until when; no token."""
    caller.require(Permission.SESSION_READ)
    if (subject is None) == (session_id is None):
        raise InvalidRequest("subject or session_id: give exactly one of the two")
    if session_id is not None:
        canonical = canonical_uuid(session_id)
        if canonical is None:
            raise InvalidRequest(f"session_id: {session_id!r} is not a session id (a UUID)")
        owner = owner_of(None, canonical)
    else:
        owner = owner_of(subject, "")
    found, cursor = await state.broker.mcp_connections.page(
        owner, limit=page.limit, after=page.after, ascending=page.ascending
    )
    return McpConnectionPage.model_validate({"items": [_body(r) for r in found], "next_cursor": cursor})


@router.delete("/{connection_id}", status_code=204)
async def forget_connection(connection_id: str, caller: Authenticated, state: State) -> Response:
    """Forget a connection and its tokens; the next step that needs it asks the person to sign in again."""
    caller.require(Permission.SESSION_MANAGE)
    await state.broker.mcp_connections.forget(canonical_id(connection_id, "MCP connection"))
    return Response(status_code=204)
