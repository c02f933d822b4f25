"""Where a Draft 2020-12 schema holds its subschemas, and the index its references resolve in.

The places are those `referencing` crawls to index a schema's `$id`s and anchors, which are also every
place a validator finds a subschema to apply. The index is built once per schema: a resolver left to
find an anchor (or a part with its own `$id`) by itself crawls the whole schema again for every lookup,
so the cost of a schema's references grew with the square of its size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urljoin

from referencing import Registry
from referencing.jsonschema import DRAFT202012

# As referencing's DRAFT202012 crawls them: a subschema as the value, in an array, or as an object's values.
IN_VALUE = (
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
IN_ARRAY = ("allOf", "anyOf", "oneOf", "prefixItems")
IN_MAP = ("$defs", "definitions", "dependentSchemas", "patternProperties", "properties")
ANCHORS = ("$anchor", "$dynamicAnchor")

# What a place that must hold a schema says when it holds something else.
NOT_A_SCHEMA = "not a schema: where a schema goes there must be a JSON object, true or false"


def escape(key: object) -> str:
    """`key` as one JSON Pointer segment."""
    return str(key).replace("~", "~0").replace("/", "~1")


def misplaced(node: dict[str, Any]) -> tuple[str, str] | None:
    """The first of `node`'s own keywords that cannot be what it is (a place for subschemas holding
    something else, an `$id` or anchor that is not a string): its pointer relative to `node`, and why."""
    for keyword in ("$id", *ANCHORS):
        value = node.get(keyword)
        if value is not None and not isinstance(value, str):
            return f"/{keyword}", f"{keyword} must be a string"
    for keyword in IN_VALUE:
        if keyword in node and not isinstance(node[keyword], dict | bool):
            return f"/{keyword}", NOT_A_SCHEMA
    containers = [k for k in (*IN_ARRAY, *IN_MAP) if k in node]
    for keyword in containers:
        problem = _misplaced_in(keyword, node[keyword])
        if problem is not None:
            return problem
    return None


def _misplaced_in(keyword: str, value: Any) -> tuple[str, str] | None:
    children: Iterable[tuple[object, Any]]
    if keyword in IN_ARRAY:
        if not isinstance(value, list):
            return f"/{keyword}", f"{keyword} must be an array of schemas"
        children = enumerate(value)
    else:
        if not isinstance(value, dict):
            return f"/{keyword}", f"{keyword} must be an object whose values are schemas"
        children = value.items()
    for key, child in children:
        if not isinstance(child, dict | bool):
            return f"/{keyword}/{escape(key)}", NOT_A_SCHEMA
    return None


def subschemas(node: dict[str, Any], where: str) -> Iterator[tuple[Any, str]]:
    """`node`'s subschemas with their pointers (of a node `misplaced` found nothing wrong with)."""
    for keyword in IN_VALUE:
        if keyword in node:
            yield node[keyword], f"{where}/{keyword}"
    for keyword in IN_ARRAY:
        for index, child in enumerate(node.get(keyword, ())):
            yield child, f"{where}/{keyword}/{index}"
    for keyword in IN_MAP:
        for name, child in node.get(keyword, {}).items():
            yield child, f"{where}/{keyword}/{escape(name)}"


def misshapen(schema: Any) -> tuple[str, str] | None:
    """Where and why the schema cannot be indexed, or None: every place for a subschema holds one, every
    `$id` is a string that resolves against the base it is under (as the index resolves it), every anchor
    a string. Iterative, one visit per subschema."""
    # The index keys the root by its `$id` without a trailing `#`, then resolves that `$id` against it.
    root_id = schema.get("$id") if isinstance(schema, dict) else None
    stack: list[tuple[Any, str, str]] = [(schema, "", root_id.rstrip("#") if isinstance(root_id, str) else "")]
    while stack:
        node, where, base = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            return where, NOT_A_SCHEMA
        problem = misplaced(node)
        if problem is not None:
            return where + problem[0], problem[1]
        identifier = node.get("$id")
        if identifier is not None:
            try:
                base = urljoin(base, identifier)
            except ValueError:
                return f"{where}/$id", f"$id {identifier[:100]!r} is not a URI reference"
        stack.extend((child, place, base) for child, place in subschemas(node, where))
    return None


def indexed(schema: Any) -> Registry[Any] | None:
    """A registry holding the schema with every `$id` and anchor in it indexed (what retrieves nothing
    else); None when the schema cannot be indexed (`misshapen` says where)."""
    resource = DRAFT202012.create_resource(schema)
    try:
        registry: Registry[Any] = Registry().with_resource(resource.id() or "", resource).crawl()
    except Exception:  # Whatever a malformed part makes the crawl raise: misshapen names it
        return None
    return registry
