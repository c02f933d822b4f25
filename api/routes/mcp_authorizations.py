"""POST /v1/sessions/{sid}/mcp-authorizations/{authorization_id}/decline: the person will not sign in to
an OAuth grant's server the session asked about (`mcp_authorization_required`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel

from api.deps import ManagedSession
from api.schemas.common import ErrorBody
from api.state import State

router = APIRouter(prefix="/v1/sessions/{session_id}/mcp-authorizations", tags=["mcp"])


class DeclinedAuthorization(BaseModel):
    authorization_id: str
    grant: str
    state: str


@router.post(
    "/{authorization_id}/decline",
    response_model=DeclinedAuthorization,
    responses={404: {"model": ErrorBody}, 409: {"model": ErrorBody}},
)
async def decline_mcp_authorization(
    session_id: str,
    authorization_id: Annotated[str, Path(max_length=64)],
    canonical: ManagedSession,
    state: State,
) -> DeclinedAuthorization:
    """Decline a sign-in the session asked for: `mcp_authorization_declined` says so, its link no longer
    completes, a run waiting for it goes on without the grant's tools (the model told why), and the grant
    is not asked for again in this session. 404 for a sign-in the session did not ask for; 409 when it ended
    already (completed, declined, or run out) or the session's storage is full."""
    grant = await state.broker.mcp_authorizations.decline(canonical, authorization_id)
    return DeclinedAuthorization(authorization_id=authorization_id, grant=grant, state="declined")
