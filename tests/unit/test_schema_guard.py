"""Schemas as data: what `broker.schema.accept` refuses, and the budgeted validator against the stock one."""

from __future__ import annotations

import time
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from common.schema.accept import MAX_DEPTH, SchemaRefused, accept
from common.schema.budget import Budgeted, OverBudget


def exponential(levels: int) -> dict[str, Any]:
    """1.4 KB at 18 levels: each definition applies the next twice, so a check applies 2^levels leaves."""
    defs: dict[str, Any] = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(levels)}
    defs[f"d{levels}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


@pytest.mark.parametrize(
    ("schema", "where", "words"),
    [
        ({"$ref": "http://127.0.0.1:9000/x"}, "/$ref", "does not name a part of this schema"),
        ({"properties": {"a": {"$ref": "file:///etc/passwd"}}}, "/properties/a/$ref", "nothing is fetched"),
        ({"items": {"$ref": "other.json#/x"}}, "/items/$ref", "does not name a part"),
        ({"$ref": "https://json-schema.org/draft/2020-12/schema"}, "/$ref", "no other schema"),
        ({"$id": "not a uri ::: %%", "items": {"$ref": "http://127.0.0.1/x"}}, "/items/$ref", "does not name"),
        # An `$id` or a subschema a validator cannot use is refused before any reference is looked at.
        ({"$id": "http://[broken/", "items": {"$ref": "http://127.0.0.1/x"}}, "/$id", "not a URI reference"),
        ({"dependentSchemas": {"": -1}, "$ref": "http://127.0.0.1/x"}, "/dependentSchemas/", "not a schema"),
        ({"$id": {"not": "a string"}, "$ref": "http://127.0.0.1/x"}, "/$id", "must be a string"),
        # Into the schema but naming nothing there.
        ({"$defs": {"a": {}}, "$ref": "#/$defs/b"}, "/$ref", "points at nothing in the schema"),
        ({"$id": "https://example.com/s", "$dynamicRef": "https://example.com/s#missing"}, "/$dynamicRef", "nothing"),
        ({"$id": "http://[broken/", "$ref": "#/$defs/a"}, "/$id", "not a URI reference"),
        ({"dependentSchemas": {"": -1}, "items": {"items": 5}, "$ref": "#/a"}, "/dependentSchemas/", "not a schema"),
        ({"$id": "https://example.com/s", "$ref": "https://example.com/t#/a"}, "/$ref", "does not name"),
        ({"$dynamicRef": "other#meta"}, "/$dynamicRef", "does not name a part"),
        # Reached only through a reference, under a keyword no validator applies: still checked.
        ({"x-extra": {"$ref": "http://evil.example/"}, "$ref": "#/x-extra"}, "/$ref/$ref", "does not name"),
        ({"required": ["a"], "$ref": "#/required"}, "/$ref", "not a schema"),
        ({"properties": {"a": {"pattern": "(?=a)"}}}, "/properties/a/pattern", "linear-time regex"),
        ({"patternProperties": {"(a)\\1": {}}}, "/patternProperties/(a)\\1", "back-references"),
        ({"pattern": "a{1001}"}, "/pattern", "repetitions over 1,000"),
        ({"minimum": float("nan")}, "/minimum", "must be finite"),
        ({"enum": [1, float("inf")]}, "/enum/1", "must be finite"),
        ({"default": {"x": float("-inf")}}, "/default/x", "must be finite"),
        (
            {"unevaluatedProperties": False, "patternProperties": {"a": {}}},
            "/unevaluatedProperties",
            "also has patternProperties",
        ),
    ],
)
def test_a_schema_that_reaches_out_or_cannot_run_linearly_is_refused_naming_where(
    schema: dict[str, Any], where: str, words: str
) -> None:
    with pytest.raises(SchemaRefused) as refused:
        accept(schema)
    assert refused.value.where == where
    assert words in str(refused.value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"row_id": {"type": "string"}}, "required": ["row_id"]},
        {"$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
        {"$id": "https://example.com/root", "$defs": {"a": {"$id": "inner", "type": "string"}}, "$ref": "inner"},
        {
            "$id": "https://example.com/r",
            "$defs": {"y": {}},
            "properties": {"x": {"$ref": "https://example.com/r#/$defs/y"}},
        },
        {"$defs": {"a": {"$anchor": "here", "type": "string"}}, "$ref": "#here"},
        {"$dynamicAnchor": "node", "type": "object", "properties": {"kids": {"items": {"$dynamicRef": "#node"}}}},
        # A recursive tree, as pydantic writes one.
        {"$defs": {"Node": {"properties": {"kids": {"items": {"$ref": "#/$defs/Node"}}}}}, "$ref": "#/$defs/Node"},
        # zod-to-json-schema's draft-07 output.
        {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {}}, "$ref": "#/definitions/a"},
        {"properties": {"x": {"pattern": "^(a+)+$"}, "y": {"pattern": "^\\p{L}{2,}$"}}},
        {"patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False},
        {"unevaluatedProperties": False, "properties": {"a": {}}},
        # JSON can carry these, and the document cannot refuse them: kept, and their calls fail.
        {"pattern": "\ud8cc"},
        # A nested keyword of the wrong kind (the top level alone is held to the meta-schema).
        {"properties": {"a": {"type": 5, "minimum": "x"}}, "$defs": {"b": {"required": 5}}, "$ref": "#/$defs/b"},
    ],
)
def test_schemas_people_write_are_accepted_unchanged(schema: dict[str, Any]) -> None:
    accept(schema)


def test_nesting_is_bounded_without_exhausting_the_stack() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5_000):
        node["not"] = {}
        node = node["not"]
    with pytest.raises(SchemaRefused) as refused:
        accept(deep)
    assert f"more than {MAX_DEPTH} levels" in str(refused.value)


CASES: list[tuple[dict[str, Any], Any]] = [
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {"a": 1}),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {}),
    ({"type": "object", "properties": {"a": {"type": "string"}}}, {"a": "x"}),
    ({"pattern": "^[a-z]+$"}, "abc"),
    ({"pattern": "^[a-z]+$"}, "ab1"),
    ({"pattern": "b"}, "abc"),
    ({"patternProperties": {"^x-": {"type": "integer"}}}, {"x-a": 1, "y": "z"}),
    ({"patternProperties": {"^x-": {"type": "integer"}}}, {"x-a": "no"}),
    ({"properties": {"a": {}}, "patternProperties": {"^x-": {}}, "additionalProperties": False}, {"a": 1, "x-b": 2}),
    ({"properties": {"a": {}}, "patternProperties": {"^x-": {}}, "additionalProperties": False}, {"a": 1, "c": 2}),
    ({"additionalProperties": {"type": "string"}}, {"a": "x", "b": 2}),
    ({"uniqueItems": True}, [1, 2, 3]),
    ({"uniqueItems": True}, [1, 1.0]),
    ({"uniqueItems": True}, [1, True]),
    ({"uniqueItems": True}, [0, False, None, "", [], {}]),
    ({"uniqueItems": True}, [{"a": 1, "b": [2]}, {"b": [2], "a": 1}]),
    ({"uniqueItems": True}, [[1, 2], [2, 1]]),
    ({"uniqueItems": False}, [1, 1]),
    ({"$defs": {"s": {"type": "string"}}, "items": {"$ref": "#/$defs/s"}}, ["a", 2]),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1.5),
    ({"unevaluatedProperties": False, "properties": {"a": {}}}, {"a": 1, "b": 2}),
    ({"unevaluatedItems": False, "prefixItems": [{}]}, [1, 2]),
]


@pytest.mark.parametrize(("schema", "instance"), CASES)
def test_the_budgeted_validator_agrees_with_the_stock_one(schema: dict[str, Any], instance: Any) -> None:
    budgeted = Budgeted()
    problem = budgeted.problem(budgeted.compile(schema), instance, 10_000)
    assert (problem == "") == Draft202012Validator(schema).is_valid(instance), problem


def test_a_schema_whose_references_fan_out_is_stopped_by_its_budget_quickly() -> None:
    budgeted = Budgeted()
    validator = budgeted.compile(exponential(18))
    started = time.monotonic()
    with pytest.raises(OverBudget):
        budgeted.problem(validator, "x", 200_000)
    assert time.monotonic() - started < 5
    # The same check within its budget answers: a small fan-out is fine.
    assert budgeted.problem(budgeted.compile(exponential(4)), "x", 200_000) == ""


def test_the_clock_stops_a_check_its_steps_would_let_run() -> None:
    budgeted = Budgeted()
    validator = budgeted.compile(exponential(30))
    started = time.monotonic()
    with pytest.raises(OverBudget):
        budgeted.problem(validator, "x", 10**9, seconds=0.2)
    assert time.monotonic() - started < 2


def test_a_backtracking_pattern_runs_in_linear_time() -> None:
    budgeted = Budgeted()
    validator = budgeted.compile({"type": "string", "pattern": "^(a+)+$"})
    started = time.monotonic()
    problem = budgeted.problem(validator, "a" * 200_000 + "!", 200_000)
    assert time.monotonic() - started < 1
    assert "does not match" in problem
    assert "(200001 characters)" in problem
    assert len(problem) <= 500


def test_repeated_items_are_found_in_linear_time() -> None:
    budgeted = Budgeted()
    validator = budgeted.compile({"type": "array", "uniqueItems": True})
    distinct = [{"n": i} for i in range(30_000)]
    started = time.monotonic()
    assert budgeted.problem(validator, distinct, 200_000) == ""
    assert "non-unique" in budgeted.problem(validator, [*distinct, {"n": 7}], 200_000)
    assert time.monotonic() - started < 2


def test_a_pattern_or_a_text_no_utf_8_engine_can_read_fails_the_call_saying_so() -> None:
    budgeted = Budgeted()
    assert "lone surrogate" in budgeted.problem(budgeted.compile({"pattern": "\ud8cc"}), "x", 1_000)
    assert "lone surrogate" in budgeted.problem(budgeted.compile({"pattern": "a"}), "\ud8cc", 1_000)


@pytest.mark.parametrize("reference", ["http://127.0.0.1:9/x", "#/$defs/missing"])
def test_a_reference_that_resolves_to_nothing_fails_the_check_and_fetches_nothing(reference: str) -> None:
    # A remote one could only have been stored before registration refused it.
    budgeted = Budgeted()
    problem = budgeted.problem(budgeted.compile({"$ref": reference}), {}, 1_000)
    assert "cannot be applied" in problem


def test_a_long_chain_of_references_is_followed_to_its_end_without_exhausting_the_stack() -> None:
    links: dict[str, Any] = {f"d{i}": {"$ref": f"#/x/d{i + 1}"} for i in range(2_000)}
    links["d2000"] = {"$ref": "http://127.0.0.1:9/x"}
    with pytest.raises(SchemaRefused) as refused:
        accept({"x": links, "$ref": "#/x/d0"})
    assert "'http://127.0.0.1:9/x' does not name a part of this schema" in str(refused.value)


def test_patterns_and_values_are_bounded() -> None:
    with pytest.raises(SchemaRefused) as refused:
        accept({"patternProperties": {f"^p{i}$": {} for i in range(300)}})
    assert "at most 256 patterns" in str(refused.value)
    with pytest.raises(SchemaRefused) as refused:
        accept({"enum": list(range(30_000))})
    assert "at most 20,000 values" in str(refused.value)
    accept({"enum": list(range(19_000))})


def test_names_tried_against_many_patterns_are_charged_for_each_try() -> None:
    budgeted = Budgeted()
    patterns: dict[str, Any] = {f"^p{i}$": {} for i in range(256)}
    validator = budgeted.compile({"additionalProperties": False, "patternProperties": patterns})
    started = time.monotonic()
    with pytest.raises(OverBudget):
        budgeted.problem(validator, {f"k{i}": 1 for i in range(50)}, 200)
    assert time.monotonic() - started < 0.05
