"""A tool call's arguments checked against the tool's JSON Schema before it goes anywhere."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from jsonschema import Draft202012Validator

from broker.arguments import schema_problem
from broker.codec import dumps, loads

# Distinct schemas kept compiled; a deployment's tool sets repeat, so this holds them all in practice.
MAX_COMPILED = 1_024


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


class Validators:
    """Compiled validators by schema text, so a registration's tools are compiled once, not per call."""

    def __init__(self, limit: int = MAX_COMPILED) -> None:
        self._limit = limit
        self._compiled: OrderedDict[str, Draft202012Validator] = OrderedDict()

    def _validator(self, schema: dict[str, Any]) -> Draft202012Validator:
        text = dumps(schema)
        validator = self._compiled.get(text)
        if validator is None:
            validator = Draft202012Validator(schema)
            self._compiled[text] = validator
            if len(self._compiled) > self._limit:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(text)
        return validator

    def problem(self, schema: dict[str, Any], arguments: dict[str, Any]) -> str:
        """'' when the arguments satisfy the schema; else the failing field, what failed, and the rule."""
        return schema_problem(self._validator(schema), arguments)
