"""A schema is data (issue 21, part 1): with only a session token, a tool's schema can make no server
process reach the network or a file, and no check of a call's arguments holds up other sessions."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.api_client import Api, Event, Session, of_type
from tests.unit.test_schema_guard import exponential

REDOS = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["x"]}
# 28 characters took 11 s with a backtracking engine, doubling with each one more.
REDOS_ARGUMENT = {"x": "a" * 28 + "!"}
GATED: dict[str, Any] = {"client_tool_policies": {"client__web__slow": "require_approval"}}


def tool(parameters: dict[str, Any], name: str = "slow") -> dict[str, Any]:
    return {"name": name, "description": "a tool", "parameters": parameters}


@contextlib.asynccontextmanager
async def listener() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A server on the loopback that records what reaches it: nothing should."""
    received: list[bytes] = []

    async def served(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read(1024))
        writer.write(b'HTTP/1.1 200 OK\r\ncontent-length: 16\r\n\r\n{"type": "null"}')
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(served, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/x", received
    finally:
        server.close()
        await server.wait_closed()


async def refused(api: Api, session: Session, parameters: Any, raw: bytes | None = None) -> dict[str, Any]:
    """Registration with `parameters`; asserts a 400 that names the tool's parameters, and no client."""
    path = f"/v1/sessions/{session.id}/clients"
    async with api.as_session(session) as client:
        if raw is None:
            body = {"name": "web", "lifetime": {"type": "never"}, "tools": [tool(parameters)]}
            answer = await client.post(path, json=body)
        else:
            headers = {"content-type": "application/json"}
            answer = await client.post(path, content=raw, headers=headers)
        assert answer.status_code == 400, answer.text
        assert (await client.get(path)).json()["items"] == []
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert "tools.0.parameters" in error["message"] or "tools[0].parameters" in error["message"], error
    return error


async def test_a_schema_that_names_a_url_or_a_file_is_refused_and_nothing_is_fetched(api: Api) -> None:
    session = await api.session()
    async with listener() as (url, received):
        for parameters in (
            {"$ref": url},
            {"type": "object", "properties": {"a": {"$ref": url + "#/a"}}},
            {"$ref": "file:///etc/passwd"},
            {"items": {"$dynamicRef": url}},
            {"x-hidden": {"$ref": url}, "$ref": "#/x-hidden"},
        ):
            error = await refused(api, session, parameters)
            assert "references resolve only within the schema itself" in error["message"]
        # Per-turn client tools are held to the same rule, before anything of the input is written.
        async with api.as_session(session) as client:
            body = {"type": "input", "text": "hi", "client_tools": [tool({"$ref": url})]}
            answer = await client.post(f"/v1/sessions/{session.id}/events", json=body)
        assert answer.status_code == 400, answer.text
        assert "references resolve only within" in answer.json()["error"]["message"]
        assert not of_type(await api.events(session), "message_user")
    assert received == []


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
async def test_a_schema_with_a_number_json_cannot_hold_is_refused(api: Api, number: bytes) -> None:
    session = await api.session()
    raw = (
        b'{"name": "web", "lifetime": {"type": "never"}, "tools": [{"name": "t", "parameters": '
        b'{"type": "number", "maximum": ' + number + b"}}]}"
    )
    error = await refused(api, session, None, raw)
    assert "must be finite" in error["message"]


async def test_a_pattern_that_needs_backtracking_is_refused(api: Api) -> None:
    session = await api.session()
    error = await refused(api, session, {"properties": {"x": {"pattern": "^(?=a)a+$"}}})
    assert "linear-time regex engine" in error["message"]
    assert "/properties/x/pattern" in error["message"]


async def round_trip(api: Api, session: Session) -> float:
    """Seconds from input to the end of its run, for a session with nothing to do with the attack."""
    before = len(of_type(await api.events(session), "run_completed"))
    started = time.monotonic()
    await api.send(session, "hello")
    await api.wait_for(session, lambda es: len(of_type(es, "run_completed")) > before, timeout=20)
    return time.monotonic() - started


def ended_more_than(count: int) -> Callable[[list[Event]], bool]:
    return lambda events: len(of_type(events, "run_completed")) > count


def error_results(events: list[Event]) -> list[str]:
    return [e["content"][0]["data"]["text"] for e in of_type(events, "tool_result") if e["is_error"]]


@pytest.mark.solo
async def test_slow_schemas_fail_their_calls_and_another_session_is_served_as_before(api: Api) -> None:
    attacker = await api.session()
    await api.register(attacker, ttl=None, tools=[tool(exponential(18)), tool(REDOS, "redos")])
    other = await api.session()
    idle = [await round_trip(api, other) for _ in range(5)]

    async def attack() -> list[Event]:
        events: list[Event] = []
        for run in range(3):
            before = len(of_type(events, "run_completed"))
            # Arguments differ from call to call, so no check's answer is remembered from another.
            await api.send(
                attacker,
                f'/call client__web__slow {{"n": {2 * run}}}\n/call client__web__slow {{"n": {2 * run + 1}}}\n'
                f'/call client__web__redos {{"x": "{REDOS_ARGUMENT["x"]}", "n": {run}}}',
            )
            events = await api.wait_for(attacker, ended_more_than(before), timeout=30)
        return events

    attacking = asyncio.create_task(attack())
    await asyncio.sleep(0.2)
    during = []
    while not attacking.done():
        during.append(await round_trip(api, other))
    events = await attacking

    assert not of_type(events, "client_tool_dispatched")
    errors = error_results(events)
    over = [text for text in errors if "could not be checked" in text]
    assert len(over) == 6
    assert "ran past its budget (200,000 steps" in over[0]
    assert "SWITCHBOARD_SCHEMA_CHECK_STEPS" in over[0]
    assert len([text for text in errors if "does not match '^(a+)+$'" in text]) == 3
    # The idle figure is a few tens of ms of polling here; the floor keeps a slow machine's noise out.
    assert statistics.median(during) <= max(2 * statistics.median(idle), statistics.median(idle) + 0.25), (
        idle,
        during,
    )


async def test_an_approver_editing_arguments_of_a_slow_schema_is_answered_at_once(api: Api) -> None:
    session = await api.session(**GATED)
    await api.register(session, ttl=None, tools=[tool(REDOS)])
    await api.send(session, '/call client__web__slow {"x": "a"}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    call_id = of_type(events, "approval_requested")[0]["call_id"]
    path = f"/v1/sessions/{session.id}/approvals/{call_id}"
    started = time.monotonic()
    async with api.as_session(session) as client:
        answer = await client.post(path, json={"decision": "allow", "arguments": REDOS_ARGUMENT})
    assert time.monotonic() - started < 2
    assert answer.status_code == 400, answer.text
    assert "does not match" in answer.json()["error"]["message"]


async def test_an_approver_editing_arguments_past_the_budget_is_told_so(api: Api) -> None:
    session = await api.session(**GATED)
    # The model's `{}` passes at once; only an `x` meets the definitions that fan out.
    slow_x = {"$defs": exponential(18)["$defs"], "properties": {"x": {"$ref": "#/$defs/d0"}}}
    await api.register(session, ttl=None, tools=[tool(slow_x)])
    await api.send(session, "/call client__web__slow {}")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    call_id = of_type(events, "approval_requested")[0]["call_id"]
    async with api.as_session(session) as client:
        path = f"/v1/sessions/{session.id}/approvals/{call_id}"
        answer = await client.post(path, json={"decision": "allow", "arguments": {"x": "s"}})
        assert answer.status_code == 400, answer.text
        assert "could not be checked" in answer.json()["error"]["message"]
        assert "ran past its budget" in answer.json()["error"]["message"]
        # Nothing was decided: the call still waits, and a plain allow goes through.
        assert (await client.post(path, json={"decision": "allow"})).status_code == 200
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert of_type(events, "client_tool_dispatched")[0]["arguments"] == {}
