"""Shapes shared by every route: the error envelope, page query parameters, timestamps."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

DEFAULT_LIMIT = 50
MAX_LIMIT = 200

Order = Literal["asc", "desc"]


class Strict(BaseModel):
    """A request body: unknown fields are refused, so a typo is a 400 rather than silently ignored."""

    model_config = ConfigDict(extra="forbid")


def _a_json_number(value: Any) -> Any:
    # pydantic's lax mode turns "5" and true into numbers; JSON Schema's integer and number are neither.
    if isinstance(value, str | bool):
        raise ValueError("must be a JSON number, not a string or a boolean")
    return value


# After an int's or a float's constraints (`Annotated[int, Field(ge=1), JSON_NUMBER]`; placed before them,
# pydantic writes the constraints into the document under its own names): what the document says, a JSON
# integer (5 and 5.0) or number, exactly.
JSON_NUMBER = BeforeValidator(_a_json_number)
JsonBool = Annotated[bool, Field(strict=True)]

_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _rfc3339(value: Any) -> Any:
    # pydantic also takes a number, a date alone or a time without an offset; `date-time` is none of them.
    if not isinstance(value, str) or _RFC3339.fullmatch(value) is None:
        raise ValueError("must be an RFC 3339 date-time with its offset, such as 2030-01-01T00:00:00Z")
    return value


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST = datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)


def _storable(moment: datetime) -> datetime:
    # Kept as ms since the epoch and shown in UTC: the document allows years 0001 to 9999 in any offset.
    if moment < _EPOCH:
        return _EPOCH
    return _LAST if moment > _LAST else moment.astimezone(UTC)


# A moment in a request body: an RFC 3339 date-time, held within 1970 to 9999 (a time before 1970 is as
# past as 1970).
DateTime = Annotated[AwareDatetime, BeforeValidator(_rfc3339), AfterValidator(_storable)]


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


def moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def optional_moment(ms: int | None) -> datetime | None:
    return None if ms is None else moment(ms)


def last_of_each_name(items: list[Any] | None) -> list[Any] | None:
    """A list of named items with each name once: where a name repeats, its last definition wins, in the
    place of its first (as a JSON object's repeated key). JSON Schema cannot require names to differ, so
    a repeat is accepted rather than refused by a rule the document cannot state."""
    if items is None:
        return None
    by_name = {item.name: item for item in items}
    return list(by_name.values()) if len(by_name) != len(items) else items
