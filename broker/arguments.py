"""A tool call's arguments held against the tool's JSON Schema (Draft 2020-12): the model's, before a
call is dispatched (workers), and an approver's edits, before they replace them (approvals)."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match


def schema_problem(validator: Draft202012Validator, arguments: Any) -> str:
    """'' when the arguments satisfy the schema; else the failing field, what failed, and the rule."""
    try:
        error = best_match(validator.iter_errors(arguments))
    except Exception as broken:
        # Only the top level of a tool's schema is checked at registration (api.schemas.json_schema): a
        # nested schema that is not one fails here, for this call alone.
        return f"the tool's parameters schema cannot be applied: {type(broken).__name__}: {broken}"[:500]
    if error is None:
        return ""
    return f"at {error.json_path}: {error.message} (rule: {error.validator})"
