"""POST /v1/sessions/{sid}/approvals/{call_id}: decide a call that waits for approval."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request, Response

from api.deps import Authenticated, ManagedSession
from api.keyed import Answer, Keyed, keyed
from api.schemas.common import ErrorBody
from api.schemas.events import AllowDecision, ApprovalDecisionForm, SessionEvent
from api.state import State

router = APIRouter(
    prefix="/v1/sessions/{session_id}/approvals", tags=["approvals"], responses={400: {"model": ErrorBody}}
)


@router.post("/{call_id:path}", response_model=SessionEvent)
async def resolve_approval(
    session_id: str,
    call_id: str,
    canonical: ManagedSession,
    decision: Annotated[ApprovalDecisionForm, Body()],
    request: Request,
    caller: Authenticated,
    state: State,
) -> Response:
    """Allow or deny a tool call waiting on approval; answers with the `approval_resolved` event. The first
    decision wins (from any tab); a later one is 409. Allow sends the call on (with `arguments`, edited
    ones); deny gives the model an error result carrying the message. Either way the run goes on. With
    `remember: "session"`, later calls of the same tool in this session are decided the same way. A call
    whose client left or dropped the tool while it waited fails now rather than being sent."""
    message = "" if isinstance(decision, AllowDecision) else decision.message or ""
    arguments = decision.arguments if isinstance(decision, AllowDecision) else None

    async def act(_: Keyed) -> Answer:
        resolved = await state.broker.approvals.resolve(
            canonical,
            call_id,
            decision.decision,
            message,
            caller.id,
            remember=decision.remember == "session",
            arguments=arguments,
        )
        return Answer(200, resolved.event.encode())

    return await keyed(request, caller, act, seed={}, session_id=canonical)
