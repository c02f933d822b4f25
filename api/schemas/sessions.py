"""Sessions, tokens, input and cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.schemas.clients import MAX_TTL_S, MIN_TTL_S, Tools
from api.schemas.common import JSON_NUMBER, Strict

MAX_INPUT_CHARS = 262_144
MAX_SUBJECT_CHARS = 200

_SUBJECT = (
    "Extension: the operator's id for the session's end user (1 to 200 characters), which the inbox filters on "
    "(`GET /v1/inbox?subject=`); on session bodies only when set"
)


class CreateSessionBody(Strict):
    agent_id: UUID
    display_name: Annotated[str | None, Field(max_length=200)] = None
    vault_ids: Annotated[list[UUID] | None, Field(max_length=10)] = None
    subject: Annotated[str | None, Field(min_length=1, max_length=MAX_SUBJECT_CHARS, description=_SUBJECT)] = None


class SessionReceiptFields(BaseModel):
    agent_id: UUID
    agent_version_id: UUID
    created_at: datetime
    display_name: str
    id: UUID
    session_token_expires_at: datetime
    status: Literal["idle", "active"]
    workspace_id: UUID
    subject: Annotated[str | None, Field(description=_SUBJECT)] = None


class CreatedSessionBody(SessionReceiptFields):
    session_token: str


class CreatedSessionReceiptBody(SessionReceiptFields):
    session_token_id: UUID


class UserCreator(BaseModel):
    type: Literal["user"]
    user_id: UUID
    display_name: str | None
    primary_email: str | None


class ApiKeyCreator(BaseModel):
    type: Literal["api_key"]
    api_key_id: UUID
    label: str


class SessionBody(BaseModel):
    agent_id: UUID
    agent_version_id: UUID
    created_at: datetime
    created_by: Annotated[UserCreator | ApiKeyCreator, Field(discriminator="type")]
    display_name: str
    id: UUID
    status: Literal["idle", "active"]
    workspace_id: UUID
    subject: Annotated[str | None, Field(description=_SUBJECT)] = None


class SessionPage(BaseModel):
    items: list[SessionBody]
    next_cursor: UUID | None


class SessionTokenBody(BaseModel):
    expires_at: datetime
    session_token: str


class SessionTokenReceiptBody(BaseModel):
    expires_at: datetime
    id: UUID
    session_id: UUID


class CancelOutcomeBody(BaseModel):
    run_id: UUID | None


# client_tools_ttl_s is the lease of the run-scoped client, so it comes only with tools to serve.
_TTL_NEEDS_TOOLS: dict[str, Any] = {
    "if": {"required": ["client_tools_ttl_s"], "properties": {"client_tools_ttl_s": {"type": "integer"}}},
    "then": {"required": ["client_tools"], "properties": {"client_tools": {"type": "array", "minItems": 1}}},
}


class PostSessionEventBody(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={**_TTL_NEEDS_TOOLS, "examples": [{"type": "input", "text": "Highlight row 7"}]},
    )

    type: Literal["input"]
    text: Annotated[str, Field(max_length=MAX_INPUT_CHARS)]
    source: Annotated[
        Literal["external"] | None,
        Field(description="Extension: `external` marks input an API key posts on behalf of a user."),
    ] = None
    client_tools: Annotated[
        Tools | None,
        Field(description="Extension: tools offered for this run only, answered by a run-scoped client"),
    ] = None
    client_tools_ttl_s: Annotated[
        Annotated[int, Field(ge=MIN_TTL_S, le=MAX_TTL_S), JSON_NUMBER] | None,
        Field(
            description="Extension: the run-scoped client gets a ttl lease of this many seconds, kept by pinging "
            "it as any ttl client; one that lapses fails the calls it owes with client_gone",
        ),
    ] = None

    @model_validator(mode="after")
    def _ttl_needs_tools(self) -> PostSessionEventBody:
        if self.client_tools_ttl_s is not None and not self.client_tools:
            raise ValueError("client_tools_ttl_s: only with client_tools (it is the lease of their run-scoped client)")
        return self


class SubmitOutcomeBody(BaseModel):
    outcome: Literal["new_run", "steered"]
    run_id: UUID
    client_id: Annotated[
        UUID | None, Field(description="Extension: the run-scoped client that receives the calls of `client_tools`")
    ] = None
