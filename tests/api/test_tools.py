"""Server tools, per-turn client tools and the step limit."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.api_client import Api, Event, of_type, run_over, types

TIMEZONE = {"name": "get_timezone", "description": "The user's time zone", "parameters": {"type": "object"}}


def final(events: list[Event]) -> str:
    text: str = of_type(events, "message_assistant")[-1]["message"]["content"][0]["data"]["text"]
    return text


async def test_server_tools_run_in_the_worker(api: Api) -> None:
    session = await api.session(server_tools=["calculate", "current_time"])
    await api.send(
        session,
        '/call calculate {"expression": "6*7"}\n/call current_time {"timezone": "Nowhere/Land"}\n'
        '/call calculate {"nope": 1}',
    )
    events = await api.wait_for(session, run_over)
    lines = final(events).splitlines()
    assert lines[0] == "calculate: 42"
    assert lines[1] == "current_time failed: unknown time zone 'Nowhere/Land'; use an IANA name such as Europe/Paris"
    # Checked against the tool's schema before the worker runs it.
    assert lines[2] == (
        "calculate failed: the arguments of calculate do not match its schema: "
        "at $: 'expression' is a required property (rule: required)"
    )
    # Server calls say nothing of clients.
    assert "client_tool_dispatched" not in types(events)


async def test_a_server_tool_can_require_approval(api: Api) -> None:
    session = await api.session(server_tools=["calculate"], server_tool_policies={"*": "require_approval"})
    await api.send(session, '/call calculate {"expression": "2+2"}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    request = of_type(events, "approval_requested")[0]
    assert request == request | {"server": "builtin", "tool": "calculate", "arguments": {"expression": "2+2"}}
    async with api.as_session(session) as client:
        allowed = await client.post(
            f"/v1/sessions/{session.id}/approvals/{request['call_id']}", json={"decision": "allow"}
        )
    assert allowed.status_code == 200
    assert final(await api.wait_for(session, run_over)) == "calculate: 4"


async def test_an_unknown_server_tool_fails_the_run_clearly(api: Api) -> None:
    session = await api.session(server_tools=["teleport"])
    await api.send(session, "hello")
    events = await api.wait_for(session, run_over)
    assert "server tool 'teleport'" in of_type(events, "run_failed")[0]["error"]


async def test_per_turn_client_tools_are_offered_for_that_run_only(api: Api) -> None:
    session = await api.session()
    sent = await api.send(session, "/call get_timezone", client_tools=[TIMEZONE])
    scoped = sent["client_id"]
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    registered = of_type(events, "client_registered")[0]
    assert registered == registered | {"client_id": scoped, "name": "turn", "lifetime": {"type": "never"}}
    dispatched = of_type(events, "client_tool_dispatched")[0]
    assert dispatched == dispatched | {"client_id": scoped, "tool": "get_timezone"}
    # The run-scoped client answers through the usual routes, with the session's token.
    assert (await api.call(session, scoped, dispatched["call_id"], "result", text="Europe/Paris")).status_code == 204
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_left")))
    assert final(events) == "get_timezone: Europe/Paris"
    left = of_type(events, "client_left")[0]
    assert left == left | {"client_id": scoped, "reason": "departed"}
    assert types(events).index("run_completed") < types(events).index("client_left")
    await api.send(session, "/call get_timezone")
    events = await api.wait_for(session, lambda es: types(es).count("run_completed") == 2)
    assert final(events).startswith("get_timezone failed: no tool named get_timezone")


async def test_a_per_turn_tool_replaces_a_server_tool_of_its_name(api: Api) -> None:
    session = await api.session(server_tools=["current_time"])
    mine = {"name": "current_time", "description": "The user's clock", "parameters": {"type": "object"}}
    sent = await api.send(session, "/call current_time", client_tools=[mine])
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    dispatched = of_type(events, "client_tool_dispatched")[0]
    assert dispatched["client_id"] == sent["client_id"]
    await api.call(session, sent["client_id"], dispatched["call_id"], "result", text="09:00 on the user's clock")
    assert final(await api.wait_for(session, run_over)) == "current_time: 09:00 on the user's clock"


async def test_cancel_fails_per_turn_calls_with_run_gone_then_the_client_leaves(api: Api) -> None:
    session = await api.session()
    sent = await api.send(session, "/call get_timezone", client_tools=[TIMEZONE])
    await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    async with api.as_session(session) as client:
        await client.post(f"/v1/sessions/{session.id}/cancel")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_left")))
    tail = types(events)[types(events).index("client_tool_failed") :]
    assert tail == ["client_tool_failed", "tool_result", "run_cancelled", "client_left"]
    assert of_type(events, "client_tool_failed")[0]["reason"] == "run_gone"
    assert of_type(events, "client_left")[0]["client_id"] == sent["client_id"]


async def test_per_turn_tools_are_validated_like_registrations(api: Api) -> None:
    session = await api.session()
    bad: list[dict[str, Any]] = [{"name": "bad name", "parameters": {}}]
    async with api.as_session(session) as client:
        answer = await client.post(
            f"/v1/sessions/{session.id}/events", json={"type": "input", "text": "x", "client_tools": bad}
        )
    assert answer.status_code == 400
    assert "client_tools[0].name" in answer.json()["error"]["message"]
    assert "message_user" not in types(await api.events(session))


async def test_a_run_stops_at_its_step_limit(api: Api) -> None:
    session = await api.session(max_steps=1, server_tools=["calculate"])
    await api.send(session, '/call calculate {"expression": "1+1"}')
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_failed")[0]["error"] == "the run reached its limit of 1 model steps"
    assert of_type(events, "tool_result")[0]["content"][0]["data"]["text"] == "2"
    await asyncio.sleep(0)
