"""The OpenAPI document as served: FastAPI's, completed with what it cannot say by itself, so that a request
the document calls valid is one the server accepts and a client generated from it learns every limit.

- The bearer credential every /v1 route takes.
- No 422: body and query validation answer 400 in the error envelope (docs/http-api.md, Errors), which
  every route already declares.
- A map whose keys have a pattern says so with `propertyNames` (pydantic writes `patternProperties`,
  which leaves keys off the pattern unconstrained).
- A client tool's `parameters` is a JSON Schema (Draft 2020-12): the dialect's meta-schema states it
  (`api.schemas.json_schema`).
- Links from the routes that create a resource to the routes that read and change it.
"""

from __future__ import annotations

from typing import Any

from api.keyed import IDEMPOTENCY_KEY_PATTERN, MAX_KEY_LENGTH
from api.schemas.agents import SCRIPTED_EXAMPLE
from api.schemas.json_schema import meta_schema

BEARER = "bearer"


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (FastAPI's document), completed in place and returned."""
    _declare_bearer(schema)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    for operation in _operations(schema):
        operation["responses"].pop("422", None)
    _walk(schema, _names_by_pattern)
    _declare_idempotency_key(schema)
    tool = components.get("ClientToolBody")
    if tool is not None:
        tool["properties"]["parameters"] = {
            **meta_schema(),
            "type": "object",
            "title": "Parameters",
            "description": "The tool's arguments as a JSON Schema (Draft 2020-12) object describing an object "
            "(`type` left out, `object`, or a list including it), checked against it before every dispatch. "
            "The top level's keywords are held to the dialect's meta-schema; every place a schema goes, at any "
            "depth, holds an object or a boolean, and every `$ref` names a part of the schema (400 otherwise). "
            "A nested keyword of the wrong kind shows as an error result, saying where, when a call is checked "
            "against it. Not checked: the deprecated `dependencies`, `$recursiveAnchor`, `$recursiveRef`, and "
            "URI formats",
        }
    _link(schema)
    return schema


def _declare_bearer(schema: dict[str, Any]) -> None:
    schema.setdefault("components", {})["securitySchemes"] = {
        BEARER: {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key (`swb_ak_...`) or a session token (`swb_st_...`)",
        }
    }
    schema["security"] = [{BEARER: []}]
    for path, operations in schema["paths"].items():
        if not path.startswith("/v1/"):
            for operation in operations.values():
                operation["security"] = []


def _declare_idempotency_key(schema: dict[str, Any]) -> None:
    # Every POST under /v1 honours the header (api/keyed.py, api/hot.py). It is stated in words, not as a
    # parameter: a generator given the parameter sends one value again and again, and a create replayed
    # after its resource was deleted answers, as it must, with the id of what is gone, which schemathesis
    # takes for a created resource not found.
    rule = (
        f"\n\nIdempotency-Key (header, optional): 1 to {MAX_KEY_LENGTH} visible ASCII characters, spaces only "
        f"between them (`{IDEMPOTENCY_KEY_PATTERN}`), else 400. A repeat with the same key and body replays "
        "the first answer; another body with the same key is 409."
    )
    for path, operations in schema["paths"].items():
        post = operations.get("post")
        if path.startswith("/v1/") and post is not None:
            post["description"] = post.get("description", post.get("summary", "")) + rule


def _operations(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [operation for operations in schema["paths"].values() for operation in operations.values()]


def _walk(node: Any, visit: Any) -> None:
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)


def _names_by_pattern(node: dict[str, Any]) -> None:
    patterns = node.get("patternProperties")
    if node.get("type") != "object" or not isinstance(patterns, dict) or len(patterns) != 1:
        return
    if "additionalProperties" in node or "properties" in node:
        return
    [(pattern, values)] = patterns.items()
    del node["patternProperties"]
    node["propertyNames"] = {**node.get("propertyNames", {}), "pattern": pattern}
    node["additionalProperties"] = values


_ID = "$response.body#/id"
# A link's path parameters: the created resource's id, and for a client the session of the request.
_KEY, _PROVIDER, _AGENT, _SESSION = ({name: _ID} for name in ("api_key_id", "provider_id", "agent_id", "session_id"))
_CLIENT = {"session_id": "$request.path.session_id", "client_id": _ID}
_SCHEDULE = {"session_id": "$request.path.session_id", "schedule_id": _ID}
# A schedule a linked request can add: a cron expression (an `at` would have to be in the future).
_SCHEDULE_EXAMPLE = {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin", "text": "Good morning"}
# (method, path, status) of a route that creates -> {link name: (method, path, parameters, body)}.
_LINKS: dict[tuple[str, str, str], dict[str, tuple[str, str, dict[str, str], Any]]] = {
    ("post", "/v1/api-keys", "201"): {
        "RevokeApiKey": ("delete", "/v1/api-keys/{api_key_id}", _KEY, None),
    },
    ("post", "/v1/model-providers", "201"): {
        "GetProvider": ("get", "/v1/model-providers/{provider_id}", _PROVIDER, None),
        "UpdateProvider": ("patch", "/v1/model-providers/{provider_id}", _PROVIDER, None),
        "DeleteProvider": ("delete", "/v1/model-providers/{provider_id}", _PROVIDER, None),
    },
    ("post", "/v1/agents", "201"): {
        "GetAgent": ("get", "/v1/agents/{agent_id}", _AGENT, None),
        "RenameAgent": ("patch", "/v1/agents/{agent_id}", _AGENT, None),
        "DeleteAgent": ("delete", "/v1/agents/{agent_id}", _AGENT, None),
        "PublishVersion": ("post", "/v1/agents/{agent_id}/versions", _AGENT, None),
        "PublishScriptedVersion": ("post", "/v1/agents/{agent_id}/versions", _AGENT, SCRIPTED_EXAMPLE),
        "ListVersions": ("get", "/v1/agents/{agent_id}/versions", _AGENT, None),
        "GetSecurity": ("get", "/v1/agents/{agent_id}/security", _AGENT, None),
        "PutSecurity": ("put", "/v1/agents/{agent_id}/security", _AGENT, None),
    },
    ("post", "/v1/agents/{agent_id}/versions", "201"): {
        "ListVersions": ("get", "/v1/agents/{agent_id}/versions", {"agent_id": "$response.body#/agent_id"}, None),
        "CreateSession": ("post", "/v1/sessions", {}, {"agent_id": "$response.body#/agent_id"}),
    },
    ("post", "/v1/sessions", "201"): {
        "GetSession": ("get", "/v1/sessions/{session_id}", _SESSION, None),
        "DeleteSession": ("delete", "/v1/sessions/{session_id}", _SESSION, None),
        "CancelRun": ("post", "/v1/sessions/{session_id}/cancel", _SESSION, None),
        "MintToken": ("post", "/v1/sessions/{session_id}/tokens", _SESSION, None),
        "PostInput": ("post", "/v1/sessions/{session_id}/events", _SESSION, None),
        "ListEvents": ("get", "/v1/sessions/{session_id}/events", _SESSION, None),
        "ListClients": ("get", "/v1/sessions/{session_id}/clients", _SESSION, None),
        "RegisterClient": ("post", "/v1/sessions/{session_id}/clients", _SESSION, None),
        "AddSchedule": ("post", "/v1/sessions/{session_id}/schedules", _SESSION, _SCHEDULE_EXAMPLE),
        "ListSchedules": ("get", "/v1/sessions/{session_id}/schedules", _SESSION, None),
    },
    ("post", "/v1/sessions/{session_id}/schedules", "201"): {
        "DeleteSchedule": ("delete", "/v1/sessions/{session_id}/schedules/{schedule_id}", _SCHEDULE, None),
        "ListSchedules": ("get", "/v1/sessions/{session_id}/schedules", {"session_id": _SCHEDULE["session_id"]}, None),
    },
    ("post", "/v1/sessions/{session_id}/clients", "201"): {
        "PingClient": ("post", "/v1/sessions/{session_id}/clients/{client_id}/ping", _CLIENT, None),
        "ReplaceTools": ("put", "/v1/sessions/{session_id}/clients/{client_id}/tools", _CLIENT, None),
        "LeaveClient": ("delete", "/v1/sessions/{session_id}/clients/{client_id}", _CLIENT, None),
        "ListClients": ("get", "/v1/sessions/{session_id}/clients", {"session_id": _CLIENT["session_id"]}, None),
    },
}


def _link(schema: dict[str, Any]) -> None:
    paths = schema["paths"]
    for (method, path, status), links in _LINKS.items():
        response = paths.get(path, {}).get(method, {}).get("responses", {}).get(status)
        if response is None:
            continue
        written = response.setdefault("links", {})
        for name, (target_method, target_path, parameters, body) in links.items():
            if target_method not in paths.get(target_path, {}):
                continue
            pointer = target_path.replace("~", "~0").replace("/", "~1")
            link: dict[str, Any] = {"operationRef": f"#/paths/{pointer}/{target_method}"}
            if parameters:
                link["parameters"] = dict(parameters)
            if body is not None:
                # The body is whole: merged into a generated one, it would keep fields that contradict it.
                link["requestBody"] = body
                link["x-schemathesis"] = {"merge_body": False}
            written[name] = link
