"""Ids, timestamps, and error messages that name the field."""

from __future__ import annotations

import uuid

import pytest

from api.errors import describe_validation
from broker.services.runs import parse_client_tool
from common.codec import canonical_uuid, rfc3339, uuid7


def test_uuid7_is_canonical_versioned_and_time_ordered() -> None:
    ids = [uuid7() for _ in range(200)]
    for value in ids:
        parsed = uuid.UUID(value)
        assert str(parsed) == value
        assert parsed.version == 7
        assert parsed.variant == uuid.RFC_4122
    # Lex order is creation order at millisecond grain.
    assert [i[:13] for i in ids] == sorted(i[:13] for i in ids)


def test_canonical_uuid() -> None:
    assert canonical_uuid("01A22AD0-37AB-71E3-9FE8-89A4AB14876A") == "01a22ad0-37ab-71e3-9fe8-89a4ab14876a"
    assert canonical_uuid("01a22ad037ab71e39fe889a4ab14876a") == "01a22ad0-37ab-71e3-9fe8-89a4ab14876a"
    assert canonical_uuid("not-a-uuid") is None


def test_rfc3339_is_utc_with_z() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00.000Z"
    assert rfc3339(1_796_014_618_539) == "2026-11-30T04:56:58.539Z"


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("client__web__highlight_row", ("web", "highlight_row")),
        ("client__web-2__a__b", ("web-2", "a__b")),
        ("client__web", None),
        ("client____x", None),
        ("web__x", None),
    ],
)
def test_client_tool_names(name: str, parsed: tuple[str, str] | None) -> None:
    assert parse_client_tool(name) == parsed


def test_validation_messages_name_the_field_as_written() -> None:
    errors = [
        {"loc": ("body", "tools", 3, "name"), "msg": "String should have at most 64 characters"},
        {"loc": ("body", "lifetime", "ttl", "data", "seconds"), "msg": "Input should be greater than or equal to 5"},
        {"loc": ("query", "after_seq"), "msg": "Value error, bad"},
        {"loc": ("body",), "msg": "Field required"},
    ]
    assert describe_validation(errors) == (
        "tools[3].name: String should have at most 64 characters; "
        "lifetime.ttl.data.seconds: Input should be greater than or equal to 5; "
        "after_seq: bad (and 1 more)"
    )
