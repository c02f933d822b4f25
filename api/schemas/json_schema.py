"""The JSON Schema dialect a client tool's `parameters` is written in: Draft 2020-12, its meta-schema's
vocabularies merged into one schema, definitions written in place. The server checks `parameters`
against it and the OpenAPI document states it, so the two cannot disagree.

Every keyword of the top level is checked; a schema nested in it (under `properties`, `items`,
`allOf`...) must be an object or a boolean, and its own keywords are not checked further. The
meta-schema refers to itself there, and generators of requests from a document (schemathesis) cannot
negate a schema that does, so the document could not state a deeper check; and checking every nested
schema against the meta-schema costs seconds for a large one. A nested schema whose keyword holds a
value of the wrong kind shows when a call is checked against it (an error result saying so).

The server holds a schema to more than the dialect (common.schema.accept: every place a schema goes holds
one, at every depth; every reference resolves, within the schema; patterns run on RE2; numbers are
finite; the top level describes an object); what of that JSON Schema can state is stated at the top level
(a reference there names a part of the schema by its fragment, `type` includes "object", `definitions`
holds schemas, and unevaluatedProperties does not come with patternProperties), the rest is refused by
the server alone, as a request the document cannot describe.

Left out of both: the keywords 2020-12 keeps only as deprecated (`dependencies`, `$recursiveAnchor`,
`$recursiveRef`: an older draft's, ignored by a 2020-12 validator; `definitions` is stated only as a map
of schemas, where `referencing` looks for `$id`s and anchors) and the URI formats (nothing here checks
them).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from common.schema.accept import SchemaRefused, accept_parameters
from common.schema.dialect import ANY_SCHEMA, dialect

# What of common.schema.accept's rules JSON Schema can state, at the top level: a reference there stays
# in the schema (it names a part of it by fragment), `definitions` holds schemas, and
# unevaluatedProperties does not come with patternProperties. Deeper, and for references to a part with
# its own `$id`, the server checks more.
_STATED = {
    "$ref": {"type": "string", "pattern": "^#"},
    "$dynamicRef": {"type": "string", "pattern": "^#"},
    "definitions": {"type": "object", "additionalProperties": ANY_SCHEMA},
}
# A tool's arguments are a JSON object: the top level's `type`, where given, includes "object".
_AN_OBJECT = {"anyOf": [{"const": "object"}, {"type": "array", "contains": {"const": "object"}}]}
_NOT_TOGETHER = {"required": ["unevaluatedProperties", "patternProperties"]}


@cache
def meta_schema() -> dict[str, Any]:
    """What a tool's `parameters` may be: the dialect, with what JSON Schema can state of the server's
    own rules; a schema nested in it is any object or boolean."""
    stated = dict(dialect()["properties"])
    stated["type"] = {"allOf": [stated["type"], _AN_OBJECT]}
    return {**ANY_SCHEMA, "properties": stated | _STATED, "not": _NOT_TOGETHER}


@cache
def _checker() -> Draft202012Validator:
    return Draft202012Validator(meta_schema(), format_checker=Draft202012Validator.FORMAT_CHECKER)


def check_json_schema(value: dict[str, Any]) -> dict[str, Any]:
    """`value`, when it is a JSON Schema of the dialect that describes an object, refers only to itself
    and that the server can apply in bounded time (common.schema.accept); a ValueError naming where it is
    not."""
    # The server's own rules first: their words say why (a reference that leaves the schema, not only
    # that it fails the document's `^#`).
    try:
        accept_parameters(value)
    except SchemaRefused as refused:
        raise ValueError(f"not accepted as a tool's schema: {refused}") from None
    error = best_match(_checker().iter_errors(value))
    if error is not None:
        where = "/" + "/".join(str(part) for part in error.absolute_path)
        raise ValueError(f"not a valid JSON Schema (Draft 2020-12): {error.message} (at {where})")
    return value
