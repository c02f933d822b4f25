"""Whether a JSON Schema may be stored: it is data, so it may only refer to parts of itself.

Every `$ref` and `$dynamicRef` that a Draft 2020-12 validator could follow is resolved here the way the
validator resolves it (the `referencing` library, with a registry that holds this schema alone and
retrieves nothing): one that names a URL, a file or any other schema is refused, instead of being fetched
when a call is checked. One into this schema that names nothing in it (`#/$defs/missing`) is kept: the
calls checked against it fail, saying so. Every `pattern` and `patternProperties` key such a validator could apply must
compile on RE2 (`broker.schema.regex`). Numbers must be finite, and nesting is bounded.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, Protocol

from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from common.schema.regex import PatternRefused, compiled, is_text

# JSON containers nested in one schema; deeper is refused (a validator recurses once per level or more).
MAX_DEPTH = 128
# Values in one schema, and patterns (each compiled, and tried against each name an object has): a
# bound on what registering, and checking, costs.
MAX_NODES = 20_000
MAX_PATTERNS = 256

# Where a Draft 2020-12 validator finds subschemas it applies to an instance.
_ONE = ("additionalProperties", "contains", "else", "if", "items", "not", "propertyNames", "then")
_ONE_UNEVALUATED = ("unevaluatedItems", "unevaluatedProperties")
_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAPS = ("$defs", "dependentSchemas", "patternProperties", "properties")


class _Resolver(Protocol):
    """What of `referencing`'s resolver the walk uses (the library does not export the class)."""

    def lookup(self, ref: str) -> Any: ...

    def in_subresource(self, subresource: Resource[Any]) -> _Resolver: ...


class SchemaRefused(ValueError):
    """A schema that may not be stored; `where` is a JSON Pointer into it."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{why} (at {where or '/'})")
        self.where = where
        self.why = why


def accept(schema: dict[str, Any]) -> None:
    """Nothing when `schema` may be stored; SchemaRefused naming where and why when it may not."""
    _check_values(schema)
    walk = _Walk()
    walk.schema(schema, _root_resolver(schema), "")
    if walk.unevaluated_properties and walk.pattern_properties:
        # The validator works out which properties were evaluated with a backtracking engine of its own.
        raise SchemaRefused(
            walk.unevaluated_properties,
            "unevaluatedProperties is not accepted in a schema that also has patternProperties",
        )


def _root_resolver(schema: dict[str, Any]) -> _Resolver:
    """The resolver a validator starts from; at the empty base when the schema's `$id` is no URI (the
    validator cannot start at all then: every call checked against it fails)."""
    try:
        return Registry().resolver_with_root(DRAFT202012.create_resource(schema))
    except Exception:
        return Registry().resolver()


def _check_values(schema: dict[str, Any]) -> None:
    """Finite numbers, at most MAX_DEPTH containers deep and MAX_NODES values; iterative, so no schema
    exhausts the stack."""
    stack: list[tuple[Any, str, int]] = [(schema, "", 1)]
    nodes = 0
    while stack:
        value, where, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise SchemaRefused(where, f"a schema may hold at most {MAX_NODES:,} values")
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaRefused(where, f"{value} is not a JSON number: numbers in a schema must be finite")
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise SchemaRefused(where, f"the schema is nested more than {MAX_DEPTH} levels deep")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((child, f"{where}/{_escape(key)}", depth + 1) for key, child in items)


def _escape(key: object) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


class _Walk:
    """Every subschema a validator could apply, with the resolver it would apply it under (a subschema
    with its own `$id` changes the base its references resolve against), each visited once; iterative,
    so no chain of references exhausts the stack."""

    def __init__(self) -> None:
        self._seen: set[int] = set()
        self._todo: list[tuple[Any, _Resolver, str]] = []
        self.patterns = 0
        self.unevaluated_properties = ""
        self.pattern_properties = ""

    def schema(self, root: Any, resolver: _Resolver, where: str) -> None:
        self._todo.append((root, resolver, where))
        while self._todo:
            node, resolver, where = self._todo.pop()
            if not isinstance(node, dict) or id(node) in self._seen:
                continue
            self._seen.add(id(node))
            # An `$id` that is no URI (or no string): the validator cannot resolve against it either (the
            # calls fail), and what is checked here against the outer base still refuses every remote one.
            with contextlib.suppress(Exception):
                resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
            for keyword in ("$ref", "$dynamicRef"):
                reference = node.get(keyword)
                if isinstance(reference, str):
                    self._follow(reference, resolver, f"{where}/{keyword}")
            self._patterns(node, where)
            self._todo.extend((child, resolver, place) for child, place in _subschemas(node, where))

    def _follow(self, reference: str, resolver: _Resolver, where: str) -> None:
        try:
            resolved = resolver.lookup(reference)
        except Exception:  # Unresolvable, or whatever a malformed part makes `referencing`'s crawl raise
            resource = reference.partition("#")[0]
            if resource and not self._own(resolver, resource):
                raise SchemaRefused(
                    where,
                    f"{reference!r} does not name a part of this schema: references resolve only within the "
                    "schema itself (nothing is fetched, no file is read, no other schema is used)",
                ) from None
            # A reference into this schema that names nothing in it: a call checked against it fails,
            # saying so (JSON Schema cannot state this, so the OpenAPI document could not either).
            return
        if not isinstance(resolved.contents, dict | bool):
            raise SchemaRefused(where, f"{reference!r} names a part of this schema that is not a schema")
        # A part reached only by reference (under a keyword no validator applies) is checked too.
        self._todo.append((resolved.contents, resolved.resolver, where))

    @staticmethod
    def _own(resolver: _Resolver, resource: str) -> bool:
        try:
            resolver.lookup(resource)
        except Exception:
            return False
        return True

    def _patterns(self, node: dict[str, Any], where: str) -> None:
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            self._compiles(pattern, f"{where}/pattern")
        properties = node.get("patternProperties")
        if isinstance(properties, dict):
            self.pattern_properties = self.pattern_properties or f"{where}/patternProperties"
            for key in properties:
                self._compiles(key, f"{where}/patternProperties/{_escape(key)}")
        if "unevaluatedProperties" in node:
            self.unevaluated_properties = self.unevaluated_properties or f"{where}/unevaluatedProperties"

    def _compiles(self, pattern: str, where: str) -> None:
        self.patterns += 1
        if self.patterns > MAX_PATTERNS:
            raise SchemaRefused(where, f"a schema may hold at most {MAX_PATTERNS} patterns")
        if not is_text(pattern):
            # Valid JSON, and a valid pattern for the document (JSON Schema cannot say otherwise): kept, and
            # a call checked against it fails, saying why. It never runs on a backtracking engine either way.
            return
        try:
            compiled(pattern)
        except PatternRefused as refused:
            raise SchemaRefused(
                where,
                f"the pattern {pattern[:100]!r} cannot run on a linear-time regex engine ({refused}): "
                "look-arounds, back-references and repetitions over 1,000 are not accepted",
            ) from None


def _subschemas(node: dict[str, Any], where: str) -> Iterator[tuple[Any, str]]:
    for keyword in (*_ONE, *_ONE_UNEVALUATED):
        if keyword in node:
            yield node[keyword], f"{where}/{keyword}"
    for keyword in _LISTS:
        if isinstance(node.get(keyword), list):
            for index, child in enumerate(node[keyword]):
                yield child, f"{where}/{keyword}/{index}"
    for keyword in _MAPS:
        if isinstance(node.get(keyword), dict):
            for name, child in node[keyword].items():
                yield child, f"{where}/{keyword}/{_escape(name)}"
