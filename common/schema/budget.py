"""A tool call's arguments held against the tool's JSON Schema (Draft 2020-12) under a budget of work.

The validator is `jsonschema`'s, extended through its public `extend`: every keyword is charged to a
meter before it runs (one step, plus the size of the value it walks where its work grows with it), and
the meter stops the check once the budget is spent, so no schema, however its references fan out, costs
more than the budget. The keywords whose stock implementations match with Python's backtracking `re` or
compare items pairwise (`pattern`, `patternProperties`, `additionalProperties`, `uniqueItems`) are
replaced by linear ones. References resolve in a registry that holds the schema alone, indexed once,
and retrieves nothing.

A schema the validator cannot apply (a nested keyword of the wrong kind, or a reference stored before
registration resolved them all) fails the call with words saying where, never an exception's class.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, cast
from urllib.parse import unquote

from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import Unresolvable

from common.schema.dialect import malformed
from common.schema.places import indexed
from common.schema.regex import PatternRefused, search

logger = logging.getLogger(__name__)

# A validator as keywords see it: `extend` builds a class of its own, which the stubs do not type.
_Applying = Any
_Keyword = Callable[[_Applying, Any, Any, dict[str, Any]], Iterator[ValidationError] | None]
# The clock is read once per this many steps.
_CLOCK_EVERY = 1_024
_RELEVANT = 500


class OverBudget(Exception):
    """The check spent its budget before it could say whether the arguments fit."""


class Meter:
    """Steps left in the check under way, and the moment it must end by (0: no clock)."""

    __slots__ = ("_clock", "_deadline", "left")

    def __init__(self) -> None:
        self.left = 0
        self._deadline = 0.0
        self._clock = 0

    def start(self, steps: int, seconds: float = 0.0) -> None:
        self.left = steps
        self._deadline = time.monotonic() + seconds if seconds else 0.0
        self._clock = _CLOCK_EVERY

    def charge(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise OverBudget
        self._clock -= steps
        if self._clock <= 0:
            self._clock = _CLOCK_EVERY
            if self._deadline and time.monotonic() > self._deadline:
                raise OverBudget


def _size(instance: Any) -> int:
    return len(instance) if isinstance(instance, dict | list) else 0


def _steps(keyword: str, value: Any, instance: Any, schema: dict[str, Any]) -> int:
    if keyword in ("$ref", "$dynamicRef"):
        # A lookup and a fresh validator: about as long as eight plain keywords, more for a long JSON
        # Pointer (its lookup walks each segment, and may cost their square).
        segments = (unquote(value) if "%" in value else value).count("/") if isinstance(value, str) else 0
        return 8 + segments * segments // 8
    if keyword == "pattern":
        return 1 + (len(instance) >> 10 if isinstance(instance, str) else 0)
    if keyword == "patternProperties":
        return 1 + _size(instance) * (1 + _size(value))
    if keyword == "additionalProperties":
        # Each name not among `properties` is tried against every pattern of `patternProperties`.
        return 1 + _size(instance) * (1 + _size(schema.get("patternProperties")))
    if keyword == "unevaluatedItems":
        # The stock keyword looks each index up in a list of the evaluated ones.
        size = _size(instance)
        return 1 + size + size * size // 256
    if keyword in ("enum", "required", "dependentRequired", "properties", "dependentSchemas"):
        return 1 + _size(value) + _size(instance)
    return 1 + _size(instance)


def _pattern(validator: _Applying, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if isinstance(instance, str) and not search(pattern, instance):
        yield ValidationError(f"{_short(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: _Applying, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if search(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: _Applying, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not isinstance(instance, dict):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        name for name in instance if name not in properties and not any(search(pattern, name) for pattern in patterns)
    ]
    if isinstance(additional, dict):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        names = ", ".join(repr(name) for name in sorted(extras)[:10])
        more = f" and {len(extras) - 10} more" if len(extras) > 10 else ""
        yield ValidationError(f"Additional properties are not allowed ({names}{more} unexpected)")


def _unique_items(meter: Meter) -> _Keyword:
    def unique_items(
        validator: _Applying, unique: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        if not unique or not isinstance(instance, list):
            return
        seen: set[object] = set()
        for index, item in enumerate(instance):
            key = _identity(item, meter)
            if key in seen:
                yield ValidationError(f"the array has non-unique elements (item {index} repeats an earlier one)")
                return
            seen.add(key)

    return unique_items


def _identity(value: Any, meter: Meter) -> object:
    """A hashable form under JSON Schema's equality: 1 and 1.0 are equal, true and 1 are not, and an
    object's keys have no order. One step per value it walks."""
    meter.charge(1)
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(_identity(item, meter) for item in value))
    return ("o", frozenset((name, _identity(item, meter)) for name, item in value.items()))


def _short(instance: str) -> str:
    return repr(instance) if len(instance) <= 60 else f"{instance[:60]!r}... ({len(instance)} characters)"


def _metered(keyword: str, function: _Keyword, meter: Meter) -> _Keyword:
    def metered(validator: _Applying, value: Any, instance: Any, schema: dict[str, Any]) -> Any:
        meter.charge(_steps(keyword, value, instance, schema))
        return function(validator, value, instance, schema)

    return metered


def metered_validator_class(meter: Meter) -> type[Validator]:
    """Draft 2020-12 with every keyword charged to `meter` and the linear replacements in place."""
    keywords: dict[str, _Keyword] = dict(Draft202012Validator.VALIDATORS)
    keywords |= {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items(meter),
    }
    metered = {keyword: _metered(keyword, function, meter) for keyword, function in keywords.items()}
    extended = validators.extend(Draft202012Validator, metered)  # type: ignore[no-untyped-call]
    return cast("type[Validator]", extended)


class Budgeted:
    """Compiled schemas and the meter their checks run under; one check at a time (checks do not await)."""

    def __init__(self) -> None:
        self._meter = Meter()
        self._class = metered_validator_class(self._meter)
        self._registry: Registry[Any] = Registry()

    def compile(self, schema: dict[str, Any]) -> Validator:
        # Indexed once: a resolver left to find an anchor by itself crawls the whole schema for each lookup.
        # One that cannot be indexed (stored before registration refused it) is tried as it is.
        registry = indexed(schema)
        return self._class(schema, registry=registry if registry is not None else self._registry)

    def problem(
        self, validator: _Applying, arguments: Any, steps: int, seconds: float = 0.0, *, locate: bool = True
    ) -> str:
        """'' when the arguments satisfy the schema; else the failing field, what failed, and the rule.
        OverBudget when `steps` (or `seconds`) run out first, and when the schema cannot be applied but
        `locate` is false (finding where takes time in proportion to the schema, not to the budget)."""
        self._meter.start(steps, seconds)
        try:
            error = best_match(validator.iter_errors(arguments))
        except (OverBudget, RecursionError) as over:
            raise OverBudget from over
        except PatternRefused as refused:
            return f"a pattern of the tool's parameters schema cannot be applied: {refused}"[:_RELEVANT]
        except Exception as broken:
            if not locate:
                raise OverBudget from broken
            return _cannot_apply(validator.schema, broken)[:_RELEVANT]
        if error is None:
            return ""
        return f"at {error.json_path}: {error.message} (rule: {error.validator})"[:_RELEVANT]


def _cannot_apply(schema: Any, broken: Exception) -> str:
    """Why a stored schema cannot be applied, in words (the exception itself goes to the log)."""
    logger.warning("a tool's parameters schema cannot be applied: %s", repr(broken)[:500])
    if isinstance(broken, Unresolvable):
        # Registration resolves every reference: this one was stored before it did.
        reference = _reference(broken)
        return f"the tool's parameters schema cannot be applied: its reference {reference} names nothing in it"
    # Only the top level of a stored schema is held to the meta-schema at registration: a nested schema
    # with a keyword of the wrong kind fails here, for this call alone.
    where = malformed(schema)
    if where:
        return f"the tool's parameters schema cannot be applied: it is not valid JSON Schema {where}"
    return "the tool's parameters schema cannot be applied: a part of it is not valid JSON Schema (Draft 2020-12)"


def _reference(unresolved: Unresolvable) -> str:
    # jsonschema raises its own wrapper from the `referencing` error that says what was looked up.
    cause = unresolved.__cause__ if isinstance(unresolved.__cause__, Unresolvable) else unresolved
    anchor = getattr(cause, "anchor", None)
    if isinstance(anchor, str):
        return f"#{anchor}"
    return f"#{cause.ref}" if cause.ref.startswith("/") else cause.ref
