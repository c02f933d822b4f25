"""Draft 2020-12's meta-schema as one plain schema (its vocabularies merged, definitions written in place,
a nested schema any object or boolean), and where in a stored schema a keyword holds a value the
dialect does not allow.

Only the top level of a tool's `parameters` is held to the dialect when it is registered (checking
every nested schema against the meta-schema itself costs seconds for a large one); a nested keyword of
the wrong kind shows when a call is checked against the schema, and `malformed` then says where.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any
from urllib.parse import urljoin

import jsonschema_specifications
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from common.schema.places import misplaced, subschemas

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# Kept by 2020-12 only as an older draft's, and ignored by a 2020-12 validator.
DEPRECATED = frozenset({"definitions", "dependencies", "$recursiveAnchor", "$recursiveRef"})
_UNCHECKED_FORMATS = frozenset({"uri", "uri-reference"})
_DEF_REF = re.compile(r"#/\$defs/(\w+)$")
# Keywords whose value maps names (not keywords) to schemas.
_NAME_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
ANY_SCHEMA = {"type": ["object", "boolean"]}
# Nested schemas `malformed` looks at, at most: a bound on the time it takes (the schema's values are).
_MOST = 20_000


@cache
def dialect() -> dict[str, Any]:
    """The dialect's keywords (the deprecated left out), each as the meta-schema states its value."""
    registry = jsonschema_specifications.REGISTRY
    root = registry[_DIALECT].contents
    parts = [root] + [registry[urljoin(_DIALECT, part["$ref"])].contents for part in root["allOf"]]
    properties: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for part in parts:
        properties.update(part.get("properties", {}))
        definitions.update(part.get("$defs", {}))
    plain = _Plain(definitions)
    return {**ANY_SCHEMA, "properties": {n: plain(s) for n, s in properties.items() if n not in DEPRECATED}}


class _Plain:
    """A part of the meta-schema with its definitions written in place and a nested schema (a dynamic
    reference) any object or boolean."""

    def __init__(self, definitions: dict[str, Any]) -> None:
        self._definitions = definitions

    def __call__(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self(value) for value in node]
        if not isinstance(node, dict):
            return node
        plain: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$comment" or (key == "format" and value in _UNCHECKED_FORMATS):
                continue
            if key == "$dynamicRef":
                plain.update(ANY_SCHEMA)
            elif key == "$ref" and isinstance(value, str) and (match := _DEF_REF.search(value)):
                plain.update(self(self._definitions[match.group(1)]))
            elif key in _NAME_MAPS and isinstance(value, dict):
                plain[key] = {name: self(schema) for name, schema in value.items()}
            else:
                plain[key] = self(value)
        return plain


@cache
def _checker() -> Draft202012Validator:
    return Draft202012Validator(dialect())


def malformed(schema: Any) -> str:
    """Where the first subschema holding a keyword of a kind the dialect does not allow is, and what is
    wrong (`at /properties/a/type: ...`); '' when none is found."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    seen = 0
    while stack and seen < _MOST:
        node, where = stack.pop()
        if not isinstance(node, dict):
            continue
        seen += 1
        error = best_match(_checker().iter_errors(node))
        if error is not None:
            inside = "".join(f"/{part}" for part in error.absolute_path)
            return f"at {where}{inside or '/'}: {error.message}"
        if misplaced(node) is None:
            stack.extend(reversed(list(subschemas(node, where))))
    return ""
