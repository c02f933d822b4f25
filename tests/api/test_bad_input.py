"""Hostile and malformed input: every answer a clear 4xx in the envelope, nothing half written."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.api_client import Api, Session, of_type
from tests.helpers import HIGHLIGHT

LIMIT = 1_048_576


def refused(answer: httpx.Response, status: int, code: str = "invalid_request") -> str:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    message: str = error["message"]
    return message


async def input_path(api: Api) -> tuple[Session, str]:
    session = await api.session()
    return session, f"/v1/sessions/{session.id}/events"


async def test_a_body_over_the_limit_is_413_and_nothing_is_written(api: Api) -> None:
    session, path = await input_path(api)
    before = await api.events(session)
    big = json.dumps({"type": "input", "text": "x" * (LIMIT + 10)}).encode()
    async with api.as_session(session) as http:
        message = refused(await http.post(path, content=big, headers={"Content-Type": "application/json"}), 413)
    assert message == f"the request body is {len(big)} bytes; the limit is {LIMIT} bytes (SWITCHBOARD_MAX_BODY_BYTES)"
    assert await api.events(session) == before


async def test_a_chunked_body_over_the_limit_is_413(api: Api) -> None:
    session, path = await input_path(api)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"type": "input", "text": "'
        for _ in range(LIMIT // 65536 + 1):
            yield b"x" * 65536
        yield b'"}'

    async with api.as_session(session) as http:
        message = refused(await http.post(path, content=chunks(), headers={"Content-Type": "application/json"}), 413)
    assert message.startswith("the request body is over the limit")


async def test_a_chunked_body_within_the_limit_is_served(api: Api) -> None:
    session, path = await input_path(api)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"type": "input", '
        yield b'"text": "in pieces"}'

    async with api.as_session(session) as http:
        answer = await http.post(path, content=chunks(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["outcome"] == "new_run"
    [said] = of_type(await api.events(session), "message_user")
    assert said["message"]["content"][0]["data"]["text"] == "in pieces"


async def test_a_bad_content_length_is_400(api: Api) -> None:
    session, path = await input_path(api)
    host, port = api.stack.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {session.token}\r\n"
    writer.write(f"{head}Content-Type: application/json\r\nContent-Length: lots\r\n\r\n{{}}".encode())
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status.split()[1] == b"400", status


@pytest.mark.parametrize(
    "body",
    [
        b'{"type": "input", "text": "\xff\xfe"}',  # not UTF-8
        b"[" * 100_000 + b"]" * 100_000,  # nested past any parser's depth
        b'{"type": "input", "text": "a", "text": "b", ' + b'"x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"type": "input", "text": "\\ud800"}',  # a lone surrogate
        b"\x00\x01\x02",
    ],
    ids=["not-utf8", "deep-array", "deep-field", "lone-surrogate", "binary"],
)
async def test_malformed_json_is_400_never_500(api: Api, body: bytes) -> None:
    session, path = await input_path(api)
    before = await api.events(session)
    async with api.as_session(session) as http:
        answer = await http.post(path, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"
    assert await api.events(session) == before


async def test_deeply_nested_tool_schemas_are_refused_cleanly(api: Api) -> None:
    session = await api.session()
    depth = 3000
    nested = '{"type": "object", "properties": {"x": ' * depth + '{"type": "object"}' + "}}" * depth
    tools = f'[{{"name": "deep", "description": "", "parameters": {nested}}}]'
    body = f'{{"name": "web", "lifetime": {{"type": "never"}}, "tools": {tools}}}'.encode()
    async with api.as_session(session) as http:
        path = f"/v1/sessions/{session.id}/clients"
        answer = await http.post(path, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert of_type(await api.events(session), "client_registered") == []


@pytest.mark.parametrize(
    "session_part",
    ["%2e%2e", "..%2f..%2fapi-keys", "%00", "01A22B9D-8662-7678-B7C8-291D46F891C0%20", "' OR 1=1 --"],
)
async def test_odd_ids_in_paths_are_404(api: Api, session_part: str) -> None:
    answer = await api.key.get(f"/v1/sessions/{session_part}")
    assert answer.status_code in (404, 400), answer.text
    assert answer.json()["error"]["code"] in ("not_found", "invalid_request")


async def test_an_uppercase_session_id_names_the_same_session(api: Api) -> None:
    session = await api.session()
    answer = await api.key.get(f"/v1/sessions/{session.id.upper()}")
    assert answer.status_code == 200
    assert answer.json()["id"] == session.id


async def test_a_result_for_another_clients_call_is_404_and_changes_nothing(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, "web")
    other = await api.register(session, "other", tools=[HIGHLIGHT])
    await api.send(session, '/call client__web__highlight_row {"row_id": "1"}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    (call,) = of_type(events, "client_tool_dispatched")
    for verb in ("ack", "result"):
        body = {"text": "not mine"} if verb == "result" else {}
        answer = await api.call(session, other["id"], call["call_id"], verb, **body)
        message = refused(answer, 404, "not_found")
        assert message == f"client {other['id']} has no call {call['call_id']}"
    assert of_type(await api.events(session), "tool_result") == []
    answer = await api.call(session, web["id"], call["call_id"], "result", text="mine")
    assert answer.status_code == 204


async def test_a_method_a_route_does_not_take_is_405_with_the_envelope_and_allow(api: Api) -> None:
    for method, path, allowed in (
        ("PUT", "/v1/sessions", {"GET", "POST"}),
        ("DELETE", "/v1/agents", {"GET", "POST"}),
        ("GET", "/v1/sessions/01a230c4-d956-7bfc-b2f1-a1945f9dfded/clients/x/ping", {"POST"}),
    ):
        answer = await api.key.request(method, path)
        assert answer.status_code == 405, (method, path, answer.text)
        assert answer.json()["error"]["code"] == "method_not_allowed"
        assert f"{method} is not allowed on {path}" in answer.json()["error"]["message"]
        assert set(answer.headers["allow"].replace(" ", "").split(",")) == allowed
    assert (await api.key.get("/v1/nothing-here")).status_code == 404


async def test_an_empty_cursor_is_the_first_page_on_every_list_route(api: Api) -> None:
    await api.session()
    for path in ("/v1/sessions", "/v1/agents", "/v1/api-keys", "/v1/model-providers"):
        first = await api.key.get(path)
        empty = await api.key.get(path, params={"after": ""})
        assert empty.status_code == 200, (path, empty.text)
        assert empty.json()["items"] == first.json()["items"]
