"""Every limit of docs/http-api.md (Limits) is a 400 naming the field and the limit; nothing is half written."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api_client import Api, types
from tests.helpers import HIGHLIGHT

TTL = {"type": "ttl", "data": {"seconds": 60}}


def tool(**overrides: Any) -> dict[str, Any]:
    return {**HIGHLIGHT, **overrides}


REFUSED_REGISTRATIONS: list[tuple[str, dict[str, Any], str]] = [
    ("name pattern", {"name": "Web", "lifetime": TTL}, "name: String should match pattern '^[a-z0-9-]+$'"),
    ("name too long", {"name": "a" * 33, "lifetime": TTL}, "name: String should have at most 32 characters"),
    ("empty name", {"name": "", "lifetime": TTL}, "name: String should have at least 1 character"),
    (
        "ttl below 5",
        {"name": "web", "lifetime": {"type": "ttl", "data": {"seconds": 4}}},
        "lifetime.ttl.data.seconds: Input should be greater than or equal to 5",
    ),
    (
        "ttl above 3600",
        {"name": "web", "lifetime": {"type": "ttl", "data": {"seconds": 3601}}},
        "lifetime.ttl.data.seconds: Input should be less than or equal to 3600",
    ),
    ("unknown lifetime", {"name": "web", "lifetime": {"type": "forever"}}, "lifetime: Input tag 'forever'"),
    (
        "65 tools",
        {"name": "web", "lifetime": TTL, "tools": [tool(name=f"t{i}") for i in range(65)]},
        "tools: List should have at most 64 items after validation, not 65",
    ),
    (
        "tool name pattern",
        {"name": "web", "lifetime": TTL, "tools": [tool(name="no spaces")]},
        "tools[0].name: String should match pattern '^[A-Za-z0-9_-]+$'",
    ),
    (
        "tool name too long",
        {"name": "web", "lifetime": TTL, "tools": [tool(name="x" * 65)]},
        "tools[0].name: String should have at most 64 characters",
    ),
    (
        "description too long",
        {"name": "web", "lifetime": TTL, "tools": [tool(description="d" * 4097)]},
        "tools[0].description: String should have at most 4096 characters",
    ),
    (
        "not a JSON Schema",
        {"name": "web", "lifetime": TTL, "tools": [tool(parameters={"type": "objekt"})]},
        "tools[0].parameters: not a valid JSON Schema (Draft 2020-12): 'objekt' is not valid under any of the"
        " given schemas (at /type)",
    ),
    (
        "parameters not an object",
        {"name": "web", "lifetime": TTL, "tools": [tool(parameters=[1])]},
        'tools[0].parameters: must be a JSON object (an object schema, such as {"type": "object", '
        '"properties": {...}}), not an array',
    ),
    ("unknown field", {"name": "web", "lifetime": TTL, "colour": "red"}, "colour: Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("case", "body", "message"), REFUSED_REGISTRATIONS, ids=[c[0] for c in REFUSED_REGISTRATIONS])
async def test_registration_limits(api: Api, case: str, body: dict[str, Any], message: str) -> None:
    session = await api.session()
    async with api.as_session(session) as client:
        answer = await client.post(f"/v1/sessions/{session.id}/clients", json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert message in error["message"]
    assert "client_registered" not in types(await api.events(session))


async def test_schemas_pass_through_unchanged(api: Api) -> None:
    session = await api.session()
    schema = {
        "title": "Args",
        "type": "object",
        "$defs": {"Row": {"type": "object", "properties": {"id": {"type": "string", "default": "1"}}}},
        "properties": {"row": {"$ref": "#/$defs/Row"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    }
    await api.register(session, tools=[tool(parameters=schema)])
    registered = next(e for e in await api.events(session) if e["type"] == "client_registered")
    assert registered["tools"][0]["parameters"] == schema
    assert registered["lifetime"] == TTL


async def test_the_33rd_active_client_is_refused(api: Api) -> None:
    session = await api.session()
    for _ in range(32):
        await api.register(session, tools=[])
    async with api.as_session(session) as client:
        answer = await client.post(f"/v1/sessions/{session.id}/clients", json={"name": "web", "lifetime": TTL})
    assert answer.status_code == 400
    assert "32 active clients, the limit" in answer.json()["error"]["message"]
    assert types(await api.events(session)).count("client_registered") == 32


async def test_result_text_is_capped(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, "/call client__web__highlight_row")
    events = await api.wait_for(session, lambda es: "client_tool_dispatched" in types(es))
    call_id = next(e for e in events if e["type"] == "client_tool_dispatched")["call_id"]
    too_long = await api.call(session, web["id"], call_id, "result", text="x" * 65_537)
    assert too_long.status_code == 400
    assert "text: String should have at most 65536 characters" in too_long.json()["error"]["message"]
    at_limit = await api.call(session, web["id"], call_id, "result", text="x" * 65_536)
    assert at_limit.status_code == 204


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"type": "input"}, "text: Field required"),
        ({"type": "note", "text": "x"}, "type: Input should be 'input'"),
        ({"type": "input", "text": 3}, "text: Input should be a valid string"),
    ],
)
async def test_input_validation(api: Api, body: dict[str, Any], message: str) -> None:
    session = await api.session()
    async with api.as_session(session) as client:
        answer = await client.post(f"/v1/sessions/{session.id}/events", json=body)
    assert answer.status_code == 400
    assert message in answer.json()["error"]["message"]


async def test_non_json_bodies_are_400(api: Api) -> None:
    session = await api.session()
    async with api.as_session(session) as client:
        answer = await client.post(
            f"/v1/sessions/{session.id}/clients",
            content=b"\xff\xfe not json",
            headers={"content-type": "application/json"},
        )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_request"
