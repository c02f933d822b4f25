"""API keys."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.common import DateTime, Strict
from broker.services.credentials import Permission


class MintApiKeyBody(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"label": "ci", "permissions": ["agent.read"], "expires_at": "2030-01-01T00:00:00Z"}]
        },
    )

    label: Annotated[str, Field(max_length=200)]
    permissions: Annotated[list[Permission], Field(max_length=15)]
    expires_at: Annotated[
        DateTime | None,
        Field(
            description="No later than the minting key's expiry; left out, the minting key's expiry (none if it "
            "has none); null: never, only under a key that never expires"
        ),
    ] = None


class ActorBody(BaseModel):
    display_name: str | None
    primary_email: str | None
    user_id: UUID


class ApiKeyReceiptBody(BaseModel):
    created_at: datetime
    expires_at: datetime | None
    id: UUID
    label: str
    permissions: list[Permission]
    prefix: str


class MintedApiKeyBody(ApiKeyReceiptBody):
    secret: str


class ApiKeyBody(ApiKeyReceiptBody):
    created_by: ActorBody
    last_used_at: datetime | None
    revoked_at: datetime | None


class ApiKeyPage(BaseModel):
    items: list[ApiKeyBody]
    next_cursor: UUID | None
