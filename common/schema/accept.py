"""Whether a JSON Schema may be stored: it is data, so it may only refer to parts of itself.

Every place a subschema goes holds an object or a boolean, at every depth, and every `$id` is a URI
reference: else the schema cannot be indexed, and a validator fails on it. Every `$ref` and `$dynamicRef`
that a Draft 2020-12 validator could follow is resolved here the way the validator resolves it (the
`referencing` library, with a registry that holds this schema alone, indexed once, and retrieves
nothing): one that names a URL, a file or any other schema is refused, instead of being fetched when a
call is checked, and so is one into this schema that names nothing in it (`#/$defs/missing`), instead
of failing every call. A reference's JSON Pointer has at most MAX_POINTER_SEGMENTS segments, and all of
a schema's at most MAX_SEGMENTS (each lookup walks them). Every `pattern` and `patternProperties` key
such a validator could apply must compile on RE2 (`common.schema.regex`). Numbers must be finite, and
nesting is bounded.

A tool's `parameters` (`accept_parameters`) also describe a JSON object, since a model's tool call
arguments always are one: the schema's `type`, and that of the schema its top-level `$ref` names, is
left out, `"object"`, or a list that includes `"object"`. `{}` (any object) is accepted.
"""

from __future__ import annotations

import math
from typing import Any, Protocol
from urllib.parse import unquote

from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from common.schema.places import escape, indexed, misplaced, misshapen, subschemas
from common.schema.regex import PatternRefused, compiled, is_text

# JSON containers nested in one schema; deeper is refused (a validator recurses once per level or more).
MAX_DEPTH = 128
# Values in one schema, and patterns (each compiled, and tried against each name an object has): a
# bound on what registering, and checking, costs.
MAX_NODES = 20_000
MAX_PATTERNS = 256
# Segments of a reference's JSON Pointer, and of all of a schema's: resolving one walks its segments (and
# costs up to their square), several times what the same text costs as plain JSON. Schemas people write
# refer to `#/$defs/Name`: two segments.
MAX_POINTER_SEGMENTS = 16
MAX_SEGMENTS = MAX_NODES
_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})


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
    _accepted(schema)


def accept_parameters(schema: dict[str, Any]) -> None:
    """`accept`, for a tool's `parameters`: the schema must also describe a JSON object."""
    _describes_an_object(schema, _accepted(schema))


def _accepted(schema: dict[str, Any]) -> _Resolver:
    _check_values(schema)
    misshape = misshapen(schema)
    if misshape is not None:
        raise SchemaRefused(*misshape)
    registry = indexed(schema)
    if registry is None:
        raise SchemaRefused("", "the schema's parts cannot be indexed: an $id in it is not a URI reference")
    resolver: _Resolver = _root_resolver(registry, schema)
    walk = _Walk()
    walk.schema(schema, resolver, "")
    if walk.unevaluated_properties and walk.pattern_properties:
        # The validator works out which properties were evaluated with a backtracking engine of its own.
        raise SchemaRefused(
            walk.unevaluated_properties,
            "unevaluatedProperties is not accepted in a schema that also has patternProperties",
        )
    return resolver


def _root_resolver(registry: Registry[Any], schema: dict[str, Any]) -> Any:
    """The resolver a validator starts from, given the indexed registry (as the budgeted validator is)."""
    return registry.resolver_with_root(DRAFT202012.create_resource(schema))


def _describes_an_object(schema: dict[str, Any], resolver: _Resolver) -> None:
    node: Any = schema
    where = ""
    seen: set[int] = set()
    while isinstance(node, dict) and id(node) not in seen:
        seen.add(id(node))
        kind = node.get("type")
        if _types(kind) and "object" not in _types(kind):
            raise SchemaRefused(
                f"{where}/type",
                f"a tool's arguments are a JSON object, so its parameters must describe one: type is {kind!r} "
                '(give "object", or leave type out)',
            )
        reference = node.get("$ref")
        if not isinstance(reference, str):
            return
        try:
            resolved = resolver.lookup(reference)
        except Exception:  # The walk resolved it, in the resource it is in: nothing more to tell here
            return
        node, resolver, where = resolved.contents, resolved.resolver, f"{where}/$ref"
    if node is False:
        raise SchemaRefused(where, "a tool's parameters must describe a JSON object, and false allows none")


def _types(kind: Any) -> list[str]:
    """The JSON types a `type` keyword names; none for a value that is not one (the dialect refuses it)."""
    kinds = kind if isinstance(kind, list) else [kind]
    return kinds if kinds and all(isinstance(k, str) and k in _SIMPLE_TYPES for k in kinds) else []


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
            stack.extend((child, f"{where}/{escape(key)}", depth + 1) for key, child in items)


class _Walk:
    """Every subschema a validator could apply, with the resolver it would apply it under (a subschema
    with its own `$id` changes the base its references resolve against), each visited once; iterative,
    so no chain of references exhausts the stack."""

    def __init__(self) -> None:
        self._seen: set[int] = set()
        self._todo: list[tuple[Any, _Resolver, str]] = []
        self._segments = 0
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
            # A part reached only by reference is applied as any other: it is held to the same shape.
            misplace = misplaced(node)
            if misplace is not None:
                raise SchemaRefused(where + misplace[0], misplace[1])
            if "$id" in node:
                try:
                    resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
                except ValueError:
                    raise SchemaRefused(f"{where}/$id", f"$id {node['$id'][:100]!r} is not a URI reference") from None
            for keyword in ("$ref", "$dynamicRef"):
                reference = node.get(keyword)
                if isinstance(reference, str):
                    self._follow(keyword, reference, resolver, f"{where}/{keyword}")
            self._patterns(node, where)
            self._todo.extend((child, resolver, place) for child, place in subschemas(node, where))

    def _follow(self, keyword: str, reference: str, resolver: _Resolver, where: str) -> None:
        resource, _, fragment = reference.partition("#")
        segments = unquote(fragment).count("/") if fragment.startswith("/") else 0
        if segments > MAX_POINTER_SEGMENTS:
            raise SchemaRefused(
                where,
                f"{keyword} {reference[:100]!r} has a JSON Pointer of {segments} segments; "
                f"at most {MAX_POINTER_SEGMENTS} are accepted",
            )
        self._segments += segments
        if self._segments > MAX_SEGMENTS:
            raise SchemaRefused(
                where, f"the schema's references hold more than {MAX_SEGMENTS:,} JSON Pointer segments in all"
            )
        try:
            resolved = resolver.lookup(reference)
        except Exception as error:  # Unresolvable, or whatever a malformed part makes `referencing` raise
            if resource and not self._own(resolver, resource):
                raise SchemaRefused(
                    where,
                    f"{reference!r} does not name a part of this schema: references resolve only within the "
                    "schema itself (nothing is fetched, no file is read, no other schema is used)",
                ) from None
            what = "points at nothing in the schema" if isinstance(error, Unresolvable) else "cannot be resolved"
            raise SchemaRefused(
                where, f"{keyword} {reference[:100]!r} {what} (a reference must name a part of the schema)"
            ) from None
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
                self._compiles(key, f"{where}/patternProperties/{escape(key)}")
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
