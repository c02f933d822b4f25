"""Schedules of a session (an extension): input the session posts itself at a moment or by a cron."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.common import DateTime, Strict
from api.schemas.sessions import MAX_INPUT_CHARS
from common.schedules import MAX_CRON_CHARS, MAX_TIMEZONE_CHARS


class CreateScheduleBody(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin", "text": "Summarise yesterday's orders"},
                {"at": "2030-01-01T09:00:00Z", "text": "Remind me of the renewal"},
            ]
        },
    )

    cron: Annotated[
        str | None,
        Field(
            max_length=MAX_CRON_CHARS,
            description="A 5-field cron expression (minute hour day-of-month month day-of-week), read in "
            "`timezone`; exactly one of `cron` and `at`",
        ),
    ] = None
    at: Annotated[DateTime | None, Field(description="One moment to fire at, in the future")] = None
    timezone: Annotated[
        str | None,
        Field(max_length=MAX_TIMEZONE_CHARS, description="An IANA time zone for `cron` (UTC when omitted)"),
    ] = None
    text: Annotated[str, Field(max_length=MAX_INPUT_CHARS, description="The input posted when it fires")]


class ScheduleBody(BaseModel):
    id: str
    cron: Annotated[str | None, Field(description="Present for a cron schedule")] = None
    at: Annotated[datetime | None, Field(description="Present for a one-time schedule")] = None
    timezone: str
    text: str
    next_fire_at: datetime
    created_at: datetime


class SchedulePage(BaseModel):
    items: list[ScheduleBody]
    next_cursor: None = None
