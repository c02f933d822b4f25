"""The bodies of `/v1/mcp/connections`: an MCP grant's OAuth connection as listed, never with a token."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel


class McpConnectionBody(BaseModel):
    id: UUID
    grant: str
    server_url: str
    subject: str | None
    session_id: UUID | None
    scopes: list[str]
    expires_at: datetime | None
    created_at: datetime


class McpConnectionPage(BaseModel):
    items: list[McpConnectionBody]
    next_cursor: UUID | None
