"""POST /v1/sessions/{sid}/approvals/{call_id}: decide a pending approval."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request, Response

from api.deps import Caller, existing_session
from api.keyed import Keyed, Outcome, keyed
from api.schemas.common import ErrorBody
from api.schemas.events import ApprovalDecisionForm, SessionEvent
from api.state import State
from broker.errors import NotFound

router = APIRouter(
    prefix="/v1/sessions/{session_id}/approvals", tags=["approvals"], responses={400: {"model": ErrorBody}}
)


@router.post("/{call_id:path}", response_model=SessionEvent)
async def resolve_approval(
    session_id: str,
    call_id: str,
    decision: Annotated[ApprovalDecisionForm, Body()],
    request: Request,
    caller: Caller,
    state: State,
) -> Response:
    """Allow or deny a tool call waiting on approval. No tool policy asks for approval yet (agent configs
    gain them with the runs work), so every call id answers 404 until then."""
    canonical = await existing_session(state, caller, session_id, "session.manage")

    async def act(_: Keyed) -> Outcome:
        raise NotFound(f"no approval is pending for call {call_id}")

    return await keyed(request, caller, act, seed={}, session_id=canonical)
