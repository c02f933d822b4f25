"""Request bodies as a client sends them (issue 11): one that is not JSON is 400 saying where it stops
being JSON (line, column, offset, reason) on every route and front door; one sent as another type, or
with no Content-Type at all, is 400 naming the header it needs. Neither lane (the fast lane of results,
FastAPI's) answers otherwise."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api_client import Api, Session, of_type
from tests.security.test_schema_attacks import clean

# (route, method, path template, a body its model takes)
ROUTES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("register", "POST", "/v1/sessions/{sid}/clients", {"name": "web", "lifetime": {"type": "never"}}),
    ("input", "POST", "/v1/sessions/{sid}/events", {"type": "input", "text": "hi"}),
    ("agent", "POST", "/v1/agents", {"name": "agent"}),
    ("security", "PUT", "/v1/agents/{aid}/security", {"allowed_origins": []}),
]


def _path(template: str, session: Session) -> str:
    return template.replace("{sid}", session.id).replace("{aid}", session.agent_id)


@pytest.mark.parametrize(("route", "method", "template", "body"), ROUTES, ids=[r[0] for r in ROUTES])
@pytest.mark.parametrize(
    ("raw", "line", "column", "char", "reason"),
    [
        (b'{"name": "web",\n  "lifetime": }', 2, 15, 30, "Expecting value"),
        (b'{"name" "web"}', 1, 9, 8, "Expecting ':' delimiter"),
        (b"", None, None, None, None),
    ],
    ids=["a value missing", "a colon missing", "empty"],
)
async def test_a_body_that_is_not_json_is_400_saying_where(
    api: Api,
    route: str,
    method: str,
    template: str,
    body: dict[str, Any],
    raw: bytes,
    line: int | None,
    column: int | None,
    char: int | None,
    reason: str | None,
) -> None:
    session = await api.session()
    headers = {"Content-Type": "application/json"}
    answer = await api.key.request(method, _path(template, session), content=raw, headers=headers)
    assert answer.status_code == 400, answer.text
    message = clean(answer.json()["error"]["message"])
    if line is None:
        assert message.startswith("body: "), message
    else:
        assert message == f"body: invalid JSON at line {line} column {column} (char {char}): {reason}"


@pytest.mark.parametrize(("route", "method", "template", "body"), ROUTES, ids=[r[0] for r in ROUTES])
async def test_a_body_sent_as_another_type_or_none_is_400_naming_the_header(
    api: Api, route: str, method: str, template: str, body: dict[str, Any]
) -> None:
    session = await api.session()
    path = _path(template, session)
    for kind in ("application/x-www-form-urlencoded", "text/plain;charset=UTF-8"):
        answer = await api.key.request(method, path, content=json.dumps(body).encode(), headers={"Content-Type": kind})
        assert answer.status_code == 400, answer.text
        message = clean(answer.json()["error"]["message"])
        assert message.startswith("body: the body must be JSON sent with Content-Type: application/json"), message
        assert repr(kind) in message
    # What `requests.post(url, data=text)` and httpx's `content=` send: no Content-Type at all.
    answer = await api.key.request(method, path, content=json.dumps(body).encode())
    assert answer.status_code == 400, answer.text
    message = clean(answer.json()["error"]["message"])
    assert message.startswith("body: the body must be JSON sent with Content-Type: application/json"), message
    assert "this request has no Content-Type" in message
    answer = await api.key.request(
        method, path, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    assert answer.status_code < 300, answer.text


async def test_a_result_sent_as_another_type_or_none_is_refused_by_either_lane(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, "/call client__web__highlight_row")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    [dispatched] = of_type(events, "client_tool_dispatched")
    path = f"/v1/sessions/{session.id}/clients/{web['id']}/calls/{dispatched['call_id']}/result"
    async with api.as_session(session) as client:
        refused = await client.post(path, content=b'{"text": "done"}', headers={"Content-Type": "text/plain"})
        assert refused.status_code == 400, refused.text
        assert "Content-Type: application/json" in clean(refused.json()["error"]["message"])
        broken = await client.post(path, content=b'{"text": "done"', headers={"Content-Type": "application/json"})
        assert broken.status_code == 400, broken.text
        assert clean(broken.json()["error"]["message"]).startswith("body: invalid JSON at line 1 column 16 (char 15)")
        untyped = await client.post(path, content=b'{"text": "done"}')
        assert untyped.status_code == 400, untyped.text
        assert "this request has no Content-Type" in clean(untyped.json()["error"]["message"])
        answered = await client.post(path, content=b'{"text": "done"}', headers={"Content-Type": "application/json"})
        assert answered.status_code == 204, answered.text


@pytest.mark.parametrize(
    ("door", "raw", "message"),
    [
        (
            "ag-ui",
            b'{"threadId": "t",\n "runId": }',
            "body: invalid JSON at line 2 column 11 (char 28): Expecting value",
        ),
        ("ai-sdk/chat", b"[1, 2", "body: invalid JSON at line 1 column 6 (char 5): Expecting ',' delimiter"),
        # The door decodes only the fields it reads: the byte that is not UTF-8 is in one.
        ("ag-ui", b'{"threadId": "\xff"}', "body: invalid JSON: it is not UTF-8 text"),
    ],
)
async def test_a_front_door_says_where_its_body_stops_being_json(api: Api, door: str, raw: bytes, message: str) -> None:
    session = await api.session()
    async with api.as_session(session) as client:
        path = f"/v1/sessions/{session.id}/{door}"
        answer = await client.post(path, content=raw, headers={"Content-Type": "application/json"})
        assert answer.status_code == 400, answer.text
        assert clean(answer.json()["error"]["message"]).startswith(message)
        # Sent with no Content-Type, the door names the header first, as every route does.
        untyped = await client.post(path, content=raw)
    assert untyped.status_code == 400, untyped.text
    assert "this request has no Content-Type" in clean(untyped.json()["error"]["message"])
