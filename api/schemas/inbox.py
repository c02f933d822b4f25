"""The inbox: what waits on a person or a client across the workspace (an extension of Switchboard's)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field


class InboxItemBody(BaseModel):
    kind: Literal["approval", "call", "input", "authorization"] = Field(
        description="`approval`: a call waiting for a decision; `call`: a client call waiting for its client to "
        "come back; `input`: an input request; `authorization`: a sign-in to an agent's MCP server that a run "
        "waits for"
    )
    session_id: UUID
    run_id: UUID | None
    call_id: str = Field(description="The call waited on; empty for an `authorization`")
    tool: str = Field(
        description="The tool's own name (as its client or server declares it); an `authorization`'s grant name"
    )
    client_name: str | None = Field(description="The client a waiting call is for; null for the other kinds")
    since: datetime = Field(description="When the wait began")
    deadline: datetime | None = Field(description="When the wait ends by itself; null when it waits for ever")
    subject: str | None = Field(description="The session's `subject`, when it was created with one")
    agent_id: UUID
    request_id: str | None = Field(
        default=None,
        description="An input request's id (answer at POST /v1/sessions/{session_id}/input-requests/{request_id}); "
        "null for the other kinds",
    )
    authorization_id: str | None = Field(
        default=None,
        description="A sign-in's id (decline at POST /v1/sessions/{session_id}/mcp-authorizations/"
        "{authorization_id}/decline); null for the other kinds",
    )
    authorization_url: str | None = Field(
        default=None, description="The link the person opens to sign in; null for the other kinds"
    )


class InboxPageBody(BaseModel):
    items: list[InboxItemBody]
    next_cursor: str | None = Field(description="Pass as `after` for the next page; null on the last page")
