"""MCP elicitation's forms: what a client may ask with, and what a person's answer must be."""

from __future__ import annotations

from typing import Any

import pytest

from common.elicitation import content_problem, schema_problem


def form(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


GOOD = {
    "type": "object",
    "title": "Transfer",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 8, "default": "Ann"},
        "when": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "site": {"type": "string", "format": "uri"},
        "tier": {"type": "string", "enum": ["a", "b"], "enumNames": ["Tier A", "Tier B"]},
        "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro"}]},
        "seats": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2},
        "ok": {"type": "boolean", "default": False},
    },
    "required": ["name"],
}


def test_a_form_of_every_allowed_kind_passes_and_its_answers_are_checked() -> None:
    assert schema_problem(GOOD) is None
    fine = {"name": "Bo", "when": "2026-12-06", "at": "2026-12-06T10:00:00+00:00", "site": "https://x.example"}
    assert content_problem(GOOD, {**fine, "tier": "b", "plan": "pro", "seats": 10, "ok": True}) is None
    # A whole number written as a float is still one.
    assert content_problem(GOOD, {"name": "Bo", "seats": 3.0}) is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({}, "content.name: required"),
        ({"name": ""}, "content.name: at least 1 characters"),
        ({"name": "x" * 9}, "content.name: at most 8 characters"),
        ({"name": "Bo", "when": "06/12/2026"}, "content.when: must be a date (ISO 8601)"),
        ({"name": "Bo", "site": "x.example"}, "content.site: must be a URI"),
        ({"name": "Bo", "tier": "c"}, "content.tier: must be one of a, b"),
        ({"name": "Bo", "plan": "gold"}, "content.plan: must be one of free, pro"),
        ({"name": "Bo", "seats": 0}, "content.seats: at least 1"),
        ({"name": "Bo", "seats": True}, "content.seats: must be a whole number"),
        ({"name": "Bo", "ok": 1}, "content.ok: must be true or false"),
        ({"name": "Bo", "extra": 1}, "content.extra: not a field of the form"),
    ],
)
def test_an_answer_that_does_not_fit_names_its_field(content: dict[str, Any], problem: str) -> None:
    assert content_problem(GOOD, content) == problem


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ([], "schema"),
        ({"type": "object"}, "schema.properties"),
        ({"type": "object", "properties": {}, "additionalProperties": False}, "schema"),
        (form(p={"type": "string", "enum": []}), "schema.properties.p.enum"),
        (form(p={"type": "string", "enum": ["a"], "enumNames": []}), "schema.properties.p.enumNames"),
        (form(p={"type": "string", "enumNames": ["A"]}), "schema.properties.p.enumNames"),
        (form(p={"type": "string", "oneOf": [{"const": 1}]}), "schema.properties.p.oneOf[0]"),
        (form(p={"type": "string", "format": "phone"}), "schema.properties.p.format"),
        (form(p={"type": "integer", "minimum": "1"}), "schema.properties.p.minimum"),
        (form(p={"type": "string", "maxLength": -1}), "schema.properties.p.maxLength"),
        (form(p={"type": "boolean", "default": "yes"}), "schema.properties.p.default"),
        (form(p={"type": "boolean", "title": 3}), "schema.properties.p.title"),
        (form(**{"a b": {"type": "string"}}), "schema.properties"),
        ({"type": "object", "properties": {}, "required": "p"}, "schema.required"),
    ],
)
def test_a_form_no_host_could_draw_is_refused_naming_the_field(schema: Any, field: str) -> None:
    problem = schema_problem(schema)
    assert problem is not None
    assert problem.split(": ")[0] == field, problem
