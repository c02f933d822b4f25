"""A provider's tool-call arguments, read as the object a tool's schema is held against."""

from __future__ import annotations

from typing import Any

from common.codec import loads


def parse_arguments(raw: str) -> tuple[dict[str, Any], str]:
    """A provider's arguments text as an object, or `({}, why)` when it is not a JSON object: such a call
    gets an error result instead of ending the run."""
    try:
        value = loads(raw)
    except ValueError as error:
        return {}, f"they are not valid JSON ({error}): {raw[:200]}"
    if not isinstance(value, dict):
        return {}, f"they are not a JSON object: {raw[:200]}"
    return value, ""
