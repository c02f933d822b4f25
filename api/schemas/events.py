"""The session events' models (generated from the catalogue: api/schemas/session_events.py) and the
approval decisions a caller posts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from api.schemas.session_events import SessionEvent as SessionEvent
from api.schemas.session_events import SessionEventPage as SessionEventPage

REMEMBER = Field(
    description="Extension: `session` decides later calls of the same model-visible tool in this session the "
    "same way, without asking"
)


class AllowDecision(BaseModel):
    model_config = {"extra": "forbid"}
    decision: Literal["allow"]
    remember: Annotated[Literal["session"] | None, REMEMBER] = None
    arguments: Annotated[
        dict[str, Any] | None,
        Field(
            description="Extension: run the call with these arguments instead of the model's (checked against "
            "a client tool's schema)"
        ),
    ] = None


class DenyDecision(BaseModel):
    model_config = {"extra": "forbid"}
    decision: Literal["deny"]
    message: str | None = None
    remember: Annotated[Literal["session"] | None, REMEMBER] = None


ApprovalDecisionForm = Annotated[AllowDecision | DenyDecision, Field(discriminator="decision")]
