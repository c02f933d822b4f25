"""Webhook endpoints and their deliveries (an extension of Switchboard's: issue 37)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.schemas.common import JsonBool, Strict
from api.schemas.providers import BASE_URL
from common.addresses import split_base_url
from common.errors import InvalidRequest
from common.webhooks import WEBHOOK_TYPES

# The longest URL an endpoint may have, and the longest description and subject.
MAX_URL = 2_048
MAX_DESCRIPTION = 500
MAX_SUBJECT = 200

_URL = re.compile(BASE_URL)
WebhookUrl = Annotated[str, Field(min_length=1, max_length=MAX_URL, json_schema_extra={"pattern": BASE_URL})]
# The types are checked by `_events`, which names an unknown one; the document lists them.
WebhookEvents = Annotated[
    list[str],
    Field(
        min_length=1,
        max_length=len(WEBHOOK_TYPES),
        json_schema_extra={"items": {"type": "string", "enum": list(WEBHOOK_TYPES)}},
    ),
]
Subject = Annotated[str, Field(min_length=1, max_length=MAX_SUBJECT)]
Description = Annotated[str, Field(max_length=MAX_DESCRIPTION)]


def _url(value: str) -> str:
    # http(s), a host, no user or password: the address itself is checked against the network rules by
    # the broker (common/addresses.py), which needs a resolver.
    try:
        split_base_url(value, "url")
    except InvalidRequest as error:
        raise ValueError(error.message.removeprefix("url: ")) from None
    if _URL.match(value) is None:
        raise ValueError(
            "must be an http or https URL: a host (a name or a bracketed IPv6 address), then an optional port"
            " and path, such as https://hooks.example.com/switchboard"
        )
    return value


def _events(value: list[str]) -> list[str]:
    unknown = [kind for kind in value if kind not in WEBHOOK_TYPES]
    if unknown:
        raise ValueError(f"unknown event type {unknown[0]!r}; the types are {', '.join(WEBHOOK_TYPES)}")
    return list(dict.fromkeys(value))


class CreateWebhookBody(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"url": "https://example.com/hooks", "events": ["approval.requested"]}]},
    )

    url: WebhookUrl
    events: WebhookEvents
    # Only events of sessions with this subject (POST /v1/sessions `subject`).
    subject: Subject | None = None
    # Only events of this agent's sessions.
    agent_id: UUID | None = None
    description: Description | None = None

    _check_url = field_validator("url")(_url)
    _check_events = field_validator("events")(_events)


class UpdateWebhookBody(Strict):
    """What is given changes; `subject`, `agent_id` and `description` given as null are cleared."""

    url: WebhookUrl | None = None
    events: WebhookEvents | None = None
    subject: Subject | None = None
    agent_id: UUID | None = None
    description: Description | None = None
    enabled: JsonBool | None = None

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return None if value is None else _url(value)

    @field_validator("events")
    @classmethod
    def _check_events(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else _events(value)


class WebhookBody(BaseModel):
    id: UUID
    url: str
    events: list[str]
    subject: str | None
    agent_id: str | None
    description: str | None
    enabled: bool
    # Why the endpoint was turned off (it answered 410 Gone, or a PATCH turned it off); null while enabled.
    disabled_reason: str | None
    created_at: datetime


class WebhookWithSecretBody(WebhookBody):
    """An endpoint as created, or with its new secret: the only answers that show it."""

    # `whsec_` and the base64 of 32 random bytes: the Standard Webhooks signing secret.
    secret: str


class WebhookPage(BaseModel):
    items: list[WebhookBody]
    next_cursor: UUID | None


class DeliveryBody(BaseModel):
    # The `webhook-id` header: the same on every attempt and on a manual retry.
    id: str
    type: str
    status: Literal["pending", "succeeded", "failed"]
    attempts: int
    last_status_code: int | None
    last_error: str | None
    # When the next attempt is due (null once the delivery succeeded or failed).
    next_attempt_at: datetime | None
    created_at: datetime


class DeliveryPage(BaseModel):
    items: list[DeliveryBody]
    next_cursor: str | None
