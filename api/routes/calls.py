"""POST /v1/sessions/{sid}/calls/{call_id}/cancel: fail one owed call while the run goes on (an extension)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request, Response
from pydantic import Field

from api.deps import Authenticated, ManagedSession
from api.keyed import Answer, Keyed, keyed
from api.schemas.common import ErrorBody, Strict
from api.state import State

MAX_CANCEL_MESSAGE = 1_000

router = APIRouter(prefix="/v1/sessions/{session_id}/calls", tags=["calls"], responses={400: {"model": ErrorBody}})


class CancelCallBody(Strict):
    message: Annotated[str | None, Field(max_length=MAX_CANCEL_MESSAGE)] = None


class CancelledCallBody(Strict):
    call_id: str
    state: str
    reason: str
    detail: str


@router.post("/{call_id:path}/cancel", response_model=CancelledCallBody)
async def cancel_call(
    session_id: str,
    call_id: str,
    canonical: ManagedSession,
    request: Request,
    caller: Authenticated,
    state: State,
    body: CancelCallBody | None = None,
) -> Response:
    """Cancel one call the run waits for: it fails at once (`client_tool_failed` with reason `run_gone`
    and `"detail": "cancelled"` for a client call), the model gets an error `tool_result` carrying the
    message, and the run goes on. 404 for an unknown call, 409 for one already settled. A client running
    the call learns of it from the `client_tool_failed` event; its result after that is 409."""
    message = (body.message if body else None) or ""

    async def act(_: Keyed) -> Answer:
        await state.broker.calls.cancel(canonical, call_id, message)
        answer = CancelledCallBody(call_id=call_id, state="failed", reason="run_gone", detail="cancelled")
        return Answer(200, answer.model_dump_json().encode())

    return await keyed(request, caller, act, seed={}, session_id=canonical)
