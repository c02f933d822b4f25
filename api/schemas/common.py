"""Shapes shared by every route: the error envelope, page query parameters, timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

DEFAULT_LIMIT = 50
MAX_LIMIT = 200

Order = Literal["asc", "desc"]


class Strict(BaseModel):
    """A request body: unknown fields are refused, so a typo is a 400 rather than silently ignored."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


def moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def optional_moment(ms: int | None) -> datetime | None:
    return None if ms is None else moment(ms)
