"""The JSON Schema dialect a client tool's `parameters` is written in: Draft 2020-12, its meta-schema's
vocabularies merged into one schema, definitions written in place. The server checks `parameters`
against it and the OpenAPI document states it, so the two cannot disagree.

Every keyword of the top level is checked; a schema nested in it (under `properties`, `items`,
`allOf`...) must be an object or a boolean, and is not checked further. The meta-schema refers to itself
there, and generators of requests from a document (schemathesis) cannot negate a schema that does, so the
document could not state a deeper check; a check the document does not state refuses requests the
document calls valid. A broken nested schema shows when a call is checked against it (an error result).

The server holds a schema to more than the dialect (broker.schema.accept: references stay within it,
patterns run on RE2, numbers are finite); what of that JSON Schema can state is stated at the top level
(a reference there names a part of the schema by its fragment, and unevaluatedProperties does not come
with patternProperties), the rest is refused by the server alone, as a request the document cannot
describe.

Left out of both: the keywords 2020-12 keeps only as deprecated (`definitions`, `dependencies`,
`$recursiveAnchor`, `$recursiveRef`: an older draft's, ignored by a 2020-12 validator) and the URI
formats (nothing here checks them).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any
from urllib.parse import urljoin

import jsonschema_specifications
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from common.schema.accept import SchemaRefused, accept

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_DEPRECATED = frozenset({"definitions", "dependencies", "$recursiveAnchor", "$recursiveRef"})
_UNCHECKED_FORMATS = frozenset({"uri", "uri-reference"})
_DEF_REF = re.compile(r"#/\$defs/(\w+)$")
# Keywords whose value maps names (not keywords) to schemas.
_NAME_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
_ANY_SCHEMA = {"type": ["object", "boolean"]}
# What of broker.schema.accept's rules JSON Schema can state, at the top level: a reference there stays
# in the schema (it names a part of it by fragment), and unevaluatedProperties does not come with
# patternProperties. Deeper, and for references to a part with its own `$id`, the server checks more.
_STATED = {
    "$ref": {"type": "string", "pattern": "^#"},
    "$dynamicRef": {"type": "string", "pattern": "^#"},
}
_NOT_TOGETHER = {"required": ["unevaluatedProperties", "patternProperties"]}


@cache
def meta_schema() -> dict[str, Any]:
    """The dialect as one schema; a schema nested in it is any object or boolean."""
    registry = jsonschema_specifications.REGISTRY
    dialect = registry[_DIALECT].contents
    parts = [dialect] + [registry[urljoin(_DIALECT, part["$ref"])].contents for part in dialect["allOf"]]
    properties: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for part in parts:
        properties.update(part.get("properties", {}))
        definitions.update(part.get("$defs", {}))
    plain = _Plain(definitions)
    stated = {name: plain(schema) for name, schema in properties.items() if name not in _DEPRECATED}
    return {**_ANY_SCHEMA, "properties": stated | _STATED, "not": _NOT_TOGETHER}


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
                plain.update(_ANY_SCHEMA)
            elif key == "$ref" and isinstance(value, str) and (match := _DEF_REF.search(value)):
                plain.update(self(self._definitions[match.group(1)]))
            elif key in _NAME_MAPS and isinstance(value, dict):
                plain[key] = {name: self(schema) for name, schema in value.items()}
            else:
                plain[key] = self(value)
        return plain


@cache
def _checker() -> Draft202012Validator:
    return Draft202012Validator(meta_schema(), format_checker=Draft202012Validator.FORMAT_CHECKER)


def check_json_schema(value: dict[str, Any]) -> dict[str, Any]:
    """`value`, when it is a JSON Schema of the dialect that refers only to itself and that the server
    can apply in bounded time (broker.schema.accept); a ValueError naming where it is not."""
    # The server's own rules first: their words say why (a reference that leaves the schema, not only
    # that it fails the document's `^#`).
    try:
        accept(value)
    except SchemaRefused as refused:
        raise ValueError(f"not accepted as a tool's schema: {refused}") from None
    error = best_match(_checker().iter_errors(value))
    if error is not None:
        where = "/" + "/".join(str(part) for part in error.absolute_path)
        raise ValueError(f"not a valid JSON Schema (Draft 2020-12): {error.message} (at {where})")
    return value
