"""What /openapi.json says a request may be is what the server takes: each body here is held both to the
document (a JSON Schema validator over its components) and to the server, and the two must agree (its
links are followed in tests/api/test_document_links.py)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from api.keyed import idempotency_key
from tests.api_client import Api
from tests.helpers import HIGHLIGHT, SCRIPTED_CONFIG

Document = dict[str, Any]

# jsonschema checks `date-time` only with an extra package; RFC 3339's grammar (section 5.6) is short.
FORMATS = FormatChecker()
RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)", re.ASCII)


@FORMATS.checks("date-time")
def _date_time(value: object) -> bool:
    if not isinstance(value, str) or not RFC3339.fullmatch(value):
        return False
    datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    return True


def body_valid(document: Document, method: str, path: str, body: Any) -> bool:
    operation = document["paths"][path][method]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    validator = Draft202012Validator({**schema, "components": document["components"]}, format_checker=FORMATS)
    return validator.is_valid(body)


def query_valid(document: Document, method: str, path: str, name: str, value: str) -> bool:
    [parameter] = [p for p in document["paths"][path][method]["parameters"] if p["name"] == name]
    return Draft202012Validator(parameter["schema"]).is_valid(value)


async def test_the_document_states_no_422_and_no_pattern_off_its_keys(document: Document) -> None:
    for operations in document["paths"].values():
        for operation in operations.values():
            assert "422" not in operation["responses"]
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    policies = schemas["PublishAgentVersionBody"]["properties"]["client_tool_policies"]["anyOf"][0]
    assert policies["propertyNames"]["pattern"] == r"^[A-Za-z0-9_-]*\*?$"
    # A policy's name, or (an extension) its object form with approval_timeout_s.
    name_form, object_form = policies["additionalProperties"]["oneOf"]
    assert name_form["enum"] == ["allow", "require_approval", "deny"]
    assert object_form == {"$ref": "#/components/schemas/PolicyBody"}
    assert "patternProperties" not in policies
    # No constraint under pydantic's own names (`ge`, `le`) where JSON Schema's belong.
    text = str(document)
    assert not re.search(r"'(ge|le|gt|lt)': ", text)


VERSION = {"model_provider_id": "00000000-0000-7000-8000-000000000001", **SCRIPTED_CONFIG}
TTL = {"type": "ttl", "data": {"seconds": 60}}
GRANT = {"name": "a", "skill_id": "01900000-0000-7000-8000-000000000000", "version": {"type": "latest"}}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

# (name, method, path, body, accepted): the document and the server must both say `accepted`.
BODIES: list[tuple[str, str, str, Any, bool]] = [
    ("max_steps 5.0 is an integer", "post", "versions", {**VERSION, "max_steps": 5.0}, True),
    ("max_steps as text", "post", "versions", {**VERSION, "max_steps": "5"}, False),
    ("max_steps 0", "post", "versions", {**VERSION, "max_steps": 0}, False),
    ("grant named parent", "post", "versions", {**VERSION, "skills": [{**GRANT, "name": "parent"}]}, False),
    ("grant names repeated", "post", "versions", {**VERSION, "skills": [GRANT, GRANT]}, True),
    ("server tools repeated", "post", "versions", {**VERSION, "server_tools": ["now", "now"]}, True),
    ("policy key off the pattern", "post", "versions", {**VERSION, "client_tool_policies": {"a b": "allow"}}, False),
    ("policy value off the enum", "post", "versions", {**VERSION, "client_tool_policies": {"a*": "ask"}}, False),
    (
        "expired key",
        "post",
        "/v1/api-keys",
        {"label": "", "permissions": [], "expires_at": "2000-01-01T00:00:00Z"},
        True,
    ),
    ("expiry as a number", "post", "/v1/api-keys", {"label": "", "permissions": [], "expires_at": 0}, False),
    (
        "expiry without an offset",
        "post",
        "/v1/api-keys",
        {"label": "", "permissions": [], "expires_at": "2030-01-01T00:00:00"},
        False,
    ),
    ("IPv6 origin", "put", "security", {"allowed_origins": ["http://[::1]:3000"]}, True),
    ("origin with a bad IPv6 host", "put", "security", {"allowed_origins": ["http://[60C6:e6877E]"]}, False),
    ("origin with a path", "put", "security", {"allowed_origins": ["https://a.example/"]}, False),
    ("origin with a port too high", "put", "security", {"allowed_origins": ["https://a.example:65536"]}, False),
    (
        "parameters with a wrong keyword",
        "post",
        "clients",
        {"name": "web", "lifetime": TTL, "tools": [{**HIGHLIGHT, "parameters": {"type": "objekt"}}]},
        False,
    ),
    (
        "parameters with a bad pattern",
        "post",
        "clients",
        {"name": "web", "lifetime": TTL, "tools": [{**HIGHLIGHT, "parameters": {"pattern": "("}}]},
        False,
    ),
    (
        "parameters with a deprecated keyword",
        "post",
        "clients",
        {"name": "web", "lifetime": TTL, "tools": [{**HIGHLIGHT, "parameters": {"dependencies": 5}}]},
        True,
    ),
    (
        "parameters whose definitions are not schemas",
        "post",
        "clients",
        {"name": "web", "lifetime": TTL, "tools": [{**HIGHLIGHT, "parameters": {"definitions": 5}}]},
        False,
    ),
    (
        "parameters of a type other than object",
        "post",
        "clients",
        {"name": "web", "lifetime": TTL, "tools": [{**HIGHLIGHT, "parameters": {"type": "string"}}]},
        False,
    ),
    (
        "parameters of types that include object",
        "post",
        "clients",
        {"name": "web", "lifetime": TTL, "tools": [{**HIGHLIGHT, "parameters": {"type": ["null", "object"]}}]},
        True,
    ),
    (
        "client tools of a type other than object",
        "post",
        "events",
        {"type": "input", "text": "hi", "client_tools": [{**HIGHLIGHT, "parameters": {"type": "array"}}]},
        False,
    ),
    ("ttl as text", "post", "clients", {"name": "web", "lifetime": {"type": "ttl", "data": {"seconds": "60"}}}, False),
    ("ttl lease without tools", "post", "events", {"type": "input", "text": "hi", "client_tools_ttl_s": 30}, False),
    ("ttl lease with no lease", "post", "events", {"type": "input", "text": "hi", "client_tools_ttl_s": None}, True),
    (
        "ttl lease with tools",
        "post",
        "events",
        {"type": "input", "text": "hi", "client_tools": [HIGHLIGHT], "client_tools_ttl_s": 30},
        True,
    ),
]
PATHS = {
    "versions": "/v1/agents/{agent_id}/versions",
    "security": "/v1/agents/{agent_id}/security",
    "clients": "/v1/sessions/{session_id}/clients",
    "events": "/v1/sessions/{session_id}/events",
}


@pytest.mark.parametrize(("name", "method", "where", "body", "accepted"), BODIES, ids=[b[0] for b in BODIES])
async def test_the_document_and_the_server_agree_on_a_body(
    api: Api, document: Document, name: str, method: str, where: str, body: Any, accepted: bool
) -> None:
    path = PATHS.get(where, where)
    assert body_valid(document, method, path, body) is accepted, name
    session = await api.session()
    concrete = path.replace("{agent_id}", session.agent_id).replace("{session_id}", session.id)
    answer = await api.key.request(method.upper(), concrete, json=body)
    assert (answer.status_code < 400) is accepted, answer.text
    if not accepted:
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "invalid_request"


async def test_a_result_in_one_form_exactly(api: Api, document: Document) -> None:
    path = "/v1/sessions/{session_id}/clients/{client_id}/calls/{call_id}/result"
    image = {"type": "image", "media_type": "image/png", "data": PNG}
    cases = [
        ({"text": "done"}, True),
        ({"text": None, "content": [image]}, True),
        ({"content": [image], "is_error": True}, True),
        ({}, False),
        ({"text": None}, False),
        ({"text": "x", "content": [image]}, False),
        ({"text": "x", "is_error": "true"}, False),
        ({"content": [{**image, "data": "not base64"}]}, False),
    ]
    for body, accepted in cases:
        assert body_valid(document, "post", path, body) is accepted, body
    # The server: each against a call of its own, answered once.
    session = await api.session()
    web = await api.register(session)
    await api.send(session, "\n".join(["/call client__web__highlight_row"] * len(cases)))
    events = await api.wait_for(session, lambda es: sum(e["type"] == "client_tool_dispatched" for e in es) == 8)
    calls = [e["call_id"] for e in events if e["type"] == "client_tool_dispatched"]
    async with api.as_session(session) as client:
        for (body, accepted), call_id in zip(cases, calls, strict=True):
            answer = await client.post(
                f"/v1/sessions/{session.id}/clients/{web['id']}/calls/{call_id}/result", json=body
            )
            assert (answer.status_code < 400) is accepted, (body, answer.text)


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("", True),
        ("01900000-0000-7000-8000-000000000000", True),
        ("01900000000070008000000000000000", True),
        ("01900000-0000-7000-8000-00000000000G", False),
        ("nope", False),
    ],
)
async def test_the_document_and_the_server_agree_on_a_cursor(
    api: Api, document: Document, value: str, accepted: bool
) -> None:
    for path in ("/v1/agents", "/v1/sessions", "/v1/api-keys", "/v1/model-providers"):
        assert query_valid(document, "get", path, "after", value) is accepted
        answer = await api.key.get(path, params={"after": value})
        assert (answer.status_code == 200) is accepted, answer.text


@pytest.mark.parametrize(
    ("value", "accepted"),
    [("", True), ("timing", True), ("progress,images", True), ("timing,bogus", False), ("timing, images", False)],
)
async def test_the_document_and_the_server_agree_on_include(
    api: Api, document: Document, value: str, accepted: bool
) -> None:
    path = "/v1/sessions/{session_id}/events"
    assert query_valid(document, "get", path, "include", value) is accepted
    session = await api.session()
    answer = await api.key.get(path.replace("{session_id}", session.id), params={"include": value})
    assert (answer.status_code == 200) is accepted, answer.text


async def test_an_expired_key_is_minted_expired(api: Api) -> None:
    for asked, shown in (("2000-01-01T00:00:00+02:00", "1999-12-31T22:00:00Z"), ("1900-01-01T00:00:00Z", None)):
        body = {"label": "old", "permissions": ["agent.read"], "expires_at": asked}
        minted = await api.key.post("/v1/api-keys", json=body)
        assert minted.status_code == 201, minted.text
        # Shown in UTC, held within what can be stored: a time before 1970 is as past as 1970.
        assert minted.json()["expires_at"] == (shown or "1970-01-01T00:00:00Z")
        refused = await api.key.get("/v1/agents", headers={"Authorization": f"Bearer {minted.json()['secret']}"})
        assert refused.status_code == 401


def _tools(*parameters: dict[str, Any]) -> dict[str, Any]:
    return {"name": "web", "lifetime": TTL, "tools": [{**HIGHLIGHT, "parameters": p} for p in parameters]}


# Bodies the document calls valid that the server refuses, by rules JSON Schema cannot state (tests/e2e/
# schemathesis.toml allows these routes that 400): (name, path, body, what the refusal says).
SERVER_ALONE: list[tuple[str, str, Any, str]] = [
    (
        "tool names repeated",
        "clients",
        {"name": "web", "lifetime": TTL, "tools": [HIGHLIGHT, {**HIGHLIGHT, "name": "o"}, HIGHLIGHT]},
        "tools: items 0 and 2 are both named 'highlight_row'",
    ),
    (
        "client tool names repeated",
        "events",
        {"type": "input", "text": "hi", "client_tools": [HIGHLIGHT, HIGHLIGHT]},
        "client_tools: items 0 and 1 are both named 'highlight_row'",
    ),
    (
        "a reference that names nothing in the schema",
        "clients",
        _tools({"type": "object", "properties": {"a": {"$ref": "#/defs/nope"}}}),
        "tools[0].parameters: not accepted as a tool's schema: $ref '#/defs/nope' points at nothing in the schema",
    ),
    (
        "a nested place for a schema holding a number",
        "clients",
        _tools({"type": "object", "items": {"items": 5}}),
        "(at /items/items)",
    ),
    (
        "a top-level reference to a schema of strings",
        "clients",
        _tools({"$ref": "#/$defs/s", "$defs": {"s": {"type": "string"}}}),
        "type is 'string'",
    ),
]


@pytest.mark.parametrize(("name", "where", "body", "words"), SERVER_ALONE, ids=[b[0] for b in SERVER_ALONE])
async def test_what_the_document_cannot_state_the_server_refuses_saying_why(
    api: Api, document: Document, name: str, where: str, body: Any, words: str
) -> None:
    path = PATHS[where]
    assert body_valid(document, "post", path, body), name
    session = await api.session()
    before = await api.events(session)
    answer = await api.key.post(path.replace("{session_id}", session.id), json=body)
    assert answer.status_code == 400, answer.text
    assert words in answer.json()["error"]["message"]
    assert await api.events(session) == before


def header_valid(document: Document, path: str, value: str) -> bool:
    description = document["paths"][path]["post"]["description"]
    match = re.search(r"Idempotency-Key \(header, optional\): 1 to (\d+) .*?\(`([^`]+)`\)", description)
    assert match is not None, description
    return len(value) <= int(match.group(1)) and re.fullmatch(match.group(2), value) is not None


@pytest.mark.parametrize(
    ("value", "accepted"),
    [("a", True), ("9f1c-key 2", True), ("k" * 255, True), ("k" * 256, False), ("é", False)],
)
async def test_the_document_and_the_server_agree_on_an_idempotency_key(
    api: Api, document: Document, value: str, accepted: bool
) -> None:
    # Every POST takes the header; the document says what it may be.
    posts = [path for path, operations in document["paths"].items() if "post" in operations]
    assert all(header_valid(document, path, value) is accepted for path in posts if path.startswith("/v1/"))
    answer = await api.key.post("/v1/agents", json={"name": "keyed"}, headers={b"Idempotency-Key": value.encode()})
    assert (answer.status_code < 400) is accepted, answer.text


def test_space_around_an_idempotency_key_is_not_part_of_it() -> None:
    # HTTP clients cannot send it (httpx refuses), but a value that arrives with it means the same key.
    assert idempotency_key({"idempotency-key": " k 1\t"}) == "k 1"


async def test_a_seq_past_the_documented_bound_is_refused(api: Api, document: Document) -> None:
    session = await api.session()
    path = f"/v1/sessions/{session.id}/events"
    for name in ("after_seq", "before_seq"):
        [parameter] = [
            p for p in document["paths"]["/v1/sessions/{session_id}/events"]["get"]["parameters"] if p["name"] == name
        ]
        assert parameter["schema"]["anyOf"][0]["maximum"] == 10**18 - 1
        assert (await api.key.get(path, params={name: 10**18 - 1})).status_code == 200
        assert (await api.key.get(path, params={name: 10**18})).status_code == 400
