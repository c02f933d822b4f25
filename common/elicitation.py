"""MCP elicitation's forms: the `requestedSchema` a client asks the person with (a flat object of string,
number, integer, boolean and enum properties, as the MCP specification restricts it so any host can draw
it as a form), checked when it is asked, and the `content` a person answers with, checked against it.

Both answer with the problem as `<field>: <rule>` (None when there is none), so a 400 names the field; the
content's field names are the form's own (`content.amount`). A future MCP relay reads the same forms.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import Any
from urllib.parse import urlsplit

# What the specification lets a property say besides its type; anything else is refused, so a form any
# host can draw is all a client can send.
_COMMON = frozenset({"type", "title", "description", "default"})
_ALLOWED = {
    "string": _COMMON | {"minLength", "maxLength", "format", "enum", "enumNames", "oneOf"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
}
_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_TOP = frozenset({"type", "properties", "required", "title", "description", "$schema"})
# Property names as a form field can carry them.
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_PROPERTIES = 64
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _annotation_problem(where: str, prop: dict[str, Any]) -> str | None:
    for word in ("title", "description"):
        if word in prop and not isinstance(prop[word], str):
            return f"{where}.{word}: must be a string"
    for word in ("minLength", "maxLength"):
        if word in prop and (not isinstance(prop[word], int) or isinstance(prop[word], bool) or prop[word] < 0):
            return f"{where}.{word}: must be a whole number, 0 or more"
    for word in ("minimum", "maximum"):
        if word in prop and not _number(prop[word]):
            return f"{where}.{word}: must be a number"
    if "format" in prop and prop["format"] not in _FORMATS:
        return f"{where}.format: must be one of {', '.join(sorted(_FORMATS))}"
    return None


def _enum_problem(where: str, prop: dict[str, Any]) -> str | None:
    """An enum is a string property with `enum` (and `enumNames`, their titles) or `oneOf` {const, title}."""
    if "enum" in prop:
        values = prop["enum"]
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            return f"{where}.enum: must be a list of strings, at least one"
        names = prop.get("enumNames")
        if names is not None and (not isinstance(names, list) or len(names) != len(values)):
            return f"{where}.enumNames: must be a list as long as enum"
        if "oneOf" in prop:
            return f"{where}: enum or oneOf, not both"
    elif "enumNames" in prop:
        return f"{where}.enumNames: only with enum"
    options = prop.get("oneOf")
    if options is None:
        return None
    if not isinstance(options, list) or not options:
        return f"{where}.oneOf: must be a list of {{const, title}} objects, at least one"
    for i, option in enumerate(options):
        if not isinstance(option, dict) or not isinstance(option.get("const"), str) or set(option) - {"const", "title"}:
            return f"{where}.oneOf[{i}]: must be {{const, title}} with const a string"
    return None


def _property_problem(where: str, prop: object) -> str | None:
    if not isinstance(prop, dict):
        return f"{where}: must be an object"
    kind = prop.get("type")
    if kind not in _ALLOWED:
        return f"{where}.type: must be string, number, integer or boolean (a form holds no objects or lists)"
    unknown = sorted(set(prop) - _ALLOWED[kind])
    if unknown:
        return f"{where}: {unknown[0]} is not a keyword of a {kind} property of a form"
    problem = _annotation_problem(where, prop) or _enum_problem(where, prop)
    if problem:
        return problem
    if "default" in prop and content_value_problem(where + ".default", prop, prop["default"]):
        return f"{where}.default: does not fit the property"
    return None


def _properties_problem(where: str, properties: object) -> str | None:
    if not isinstance(properties, dict):
        return f"{where}: must be an object"
    if len(properties) > MAX_PROPERTIES:
        return f"{where}: at most {MAX_PROPERTIES} properties"
    for name, prop in properties.items():
        if not _NAME.fullmatch(name):
            return f"{where}: {name!r} is not a field name (1 to 64 of A-Z a-z 0-9 _ . -)"
        problem = _property_problem(f"{where}.{name}", prop)
        if problem:
            return problem
    return None


def schema_problem(schema: object, where: str = "schema") -> str | None:
    """What is wrong with a form (`requestedSchema`), or None."""
    if not isinstance(schema, dict):
        return f"{where}: must be an object"
    unknown = sorted(set(schema) - _TOP)
    if unknown:
        return f"{where}: {unknown[0]} is not a keyword of a form (type, properties, required, title, description)"
    if schema.get("type") != "object":
        return f'{where}.type: must be "object"'
    properties = schema.get("properties")
    problem = _properties_problem(f"{where}.properties", properties)
    if problem:
        return problem
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return f"{where}.required: must be a list of property names"
    missing = [name for name in required if name not in properties]  # type: ignore[operator]
    return f"{where}.required: {missing[0]} is not a property" if missing else None


def _string_problem(where: str, prop: dict[str, Any], value: str) -> str | None:
    if "minLength" in prop and len(value) < prop["minLength"]:
        return f"{where}: at least {prop['minLength']} characters"
    if "maxLength" in prop and len(value) > prop["maxLength"]:
        return f"{where}: at most {prop['maxLength']} characters"
    if "enum" in prop and value not in prop["enum"]:
        return f"{where}: must be one of {', '.join(prop['enum'])}"
    if "oneOf" in prop and value not in [option["const"] for option in prop["oneOf"]]:
        return f"{where}: must be one of {', '.join(option['const'] for option in prop['oneOf'])}"
    return _format_problem(where, prop.get("format"), value)


def _format_problem(where: str, form: object, value: str) -> str | None:
    try:
        if form == "email" and not _EMAIL.fullmatch(value):
            return f"{where}: must be an email address"
        if form == "uri" and not urlsplit(value).scheme:
            return f"{where}: must be a URI"
        if form == "date":
            date.fromisoformat(value)
        if form == "date-time":
            datetime.fromisoformat(value)
    except ValueError:
        return f"{where}: must be a {form} (ISO 8601)"
    return None


def content_value_problem(where: str, prop: dict[str, Any], value: object) -> str | None:
    """What is wrong with one answered value of a (checked) property, or None."""
    kind = prop["type"]
    if kind == "string":
        if not isinstance(value, str):
            return f"{where}: must be a string"
        return _string_problem(where, prop, value)
    if kind == "boolean":
        return None if isinstance(value, bool) else f"{where}: must be true or false"
    if not _number(value) or (kind == "integer" and not float(value).is_integer()):  # type: ignore[arg-type]
        return f"{where}: must be {'a whole number' if kind == 'integer' else 'a number'}"
    number = float(value)  # type: ignore[arg-type]
    if "minimum" in prop and number < prop["minimum"]:
        return f"{where}: at least {prop['minimum']}"
    if "maximum" in prop and number > prop["maximum"]:
        return f"{where}: at most {prop['maximum']}"
    return None


def content_problem(schema: dict[str, Any], content: dict[str, Any], where: str = "content") -> str | None:
    """What is wrong with a person's answer to a (checked) form, or None."""
    properties: dict[str, Any] = schema["properties"]
    for name, value in content.items():
        prop = properties.get(name)
        if prop is None:
            return f"{where}.{name}: not a field of the form"
        problem = content_value_problem(f"{where}.{name}", prop, value)
        if problem:
            return problem
    for name in schema.get("required", []):
        if name not in content:
            return f"{where}.{name}: required"
    return None
