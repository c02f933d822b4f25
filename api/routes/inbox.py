"""GET /v1/inbox: what waits on a person or a client across the workspace, oldest first (an extension)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import CURSOR_PATTERN as ID_PATTERN
from api.deps import Authenticated
from api.schemas.common import DEFAULT_LIMIT, MAX_LIMIT, ErrorBody, moment, optional_moment
from api.schemas.inbox import InboxItemBody, InboxPageBody
from api.schemas.sessions import MAX_SUBJECT_CHARS
from api.state import State
from broker.services.credentials import Permission
from broker.services.inbox import CURSOR_PATTERN, MAX_CURSOR_CHARS, InboxKind, Item
from common.codec import canonical_uuid

router = APIRouter(prefix="/v1/inbox", tags=["inbox"], responses={400: {"model": ErrorBody}})


def _body(item: Item) -> InboxItemBody:
    return InboxItemBody.model_validate(
        {
            "kind": item.kind,
            "session_id": item.session_id,
            "run_id": item.run_id,
            "call_id": item.call_id,
            "tool": item.tool,
            "client_name": item.client_name,
            "since": moment(item.since),
            "deadline": optional_moment(item.deadline),
            "subject": item.subject,
            "agent_id": item.agent_id,
            "request_id": item.request_id,
            "authorization_id": item.authorization_id,
            "authorization_url": item.authorization_url,
        }
    )


@router.get("", response_model=InboxPageBody)
async def list_inbox(
    caller: Authenticated,
    state: State,
    kind: Annotated[InboxKind | None, Query(description="Only items of this kind")] = None,
    agent_id: Annotated[
        str | None, Query(pattern=ID_PATTERN, description="Only items of this agent's sessions (empty: any agent)")
    ] = None,
    subject: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_SUBJECT_CHARS, description="Only items of sessions with this subject"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    after: Annotated[
        str | None,
        Query(
            max_length=MAX_CURSOR_CHARS,
            pattern=CURSOR_PATTERN,
            description="The `next_cursor` of the previous page (empty: the first)",
        ),
    ] = None,
) -> InboxPageBody:
    """Open approvals, calls waiting for their client, input requests and sign-ins runs wait for across the
    workspace, oldest `since` first; the filters combine. An API key with `session.read`."""
    caller.require(Permission.SESSION_READ)
    agent = canonical_uuid(agent_id) if agent_id else None
    page = await state.broker.inbox.page(kind=kind, agent_id=agent, subject=subject, limit=limit, after=after or None)
    return InboxPageBody(items=[_body(item) for item in page.items], next_cursor=page.next_cursor)
