"""Approvals: require_approval waits (no timer, no worker), the first decision wins, the run goes on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from common.events.build import args_hash
from tests.api_client import Api, Event, Session, of_type, run_over
from tests.helpers import held_work
from tests.sse import Frames

pytestmark = pytest.mark.both_redis

GATED: dict[str, Any] = {"client_tool_policies": {"client__web__highlight_row": "require_approval"}}


async def decide(api: Api, session: Session, call_id: str, body: dict[str, Any], key: str | None = None) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    async with api.as_session(session) as client:
        return await client.post(f"/v1/sessions/{session.id}/approvals/{call_id}", json=body, headers=headers)


async def until(frames: Frames, kind: str) -> Event:
    while True:
        event = await frames.event()
        if event["type"] == kind:
            return event


async def test_two_tabs_see_the_request_and_the_first_decision_wins(api: Api) -> None:
    session = await api.session(**GATED)
    web = await api.register(session)
    async with api.stream(session) as one, api.stream(session) as two:
        await api.send(session, '/call client__web__highlight_row {"row_id": "7"}')
        requested = await asyncio.gather(until(one, "approval_requested"), until(two, "approval_requested"))
        assert requested[0] == requested[1]
        request = requested[0]
        assert request == request | {"server": "client:web", "tool": "highlight_row", "arguments": {"row_id": "7"}}
        assert request["args_hash"] == args_hash({"row_id": "7"})
        # Nothing reaches the client before a decision.
        assert "client_tool_dispatched" not in [e["type"] for e in await api.events(session)]
        first, second = await asyncio.gather(
            decide(api, session, request["call_id"], {"decision": "allow"}),
            decide(api, session, request["call_id"], {"decision": "deny", "message": "too late"}),
        )
        outcomes = sorted([first.status_code, second.status_code])
        assert outcomes == [200, 409]
        winner = first if first.status_code == 200 else second
        resolved = winner.json()
        assert resolved["type"] == "approval_resolved"
        assert resolved["resolved_by"]
        for tab in (one, two):
            assert await until(tab, "approval_resolved") == resolved
    if resolved["decision"] == "allow":
        events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
        dispatched = of_type(events, "client_tool_dispatched")[0]
        assert dispatched["client_id"] == web["id"]
        await api.call(session, web["id"], dispatched["call_id"], "result", text="done")
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_completed")


async def test_allow_dispatches_and_deny_sends_the_message_to_the_model(api: Api) -> None:
    session = await api.session(**GATED)
    web = await api.register(session)
    await api.send(
        session, '/call client__web__highlight_row {"row_id": "1"}\n/call client__web__highlight_row {"row_id": "2"}'
    )
    events = await api.wait_for(session, lambda es: len(of_type(es, "approval_requested")) == 2)
    allow_id, deny_id = (e["call_id"] for e in of_type(events, "approval_requested"))
    allowed = await decide(api, session, allow_id, {"decision": "allow"}, key="k1")
    replay = await decide(api, session, allow_id, {"decision": "allow"}, key="k1")
    assert allowed.status_code == replay.status_code == 200
    assert allowed.content == replay.content
    denied = await decide(api, session, deny_id, {"decision": "deny", "message": "not that row"})
    assert denied.json()["deny_message"] == "not that row"
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert [d["call_id"] for d in of_type(events, "client_tool_dispatched")] == [allow_id]
    await api.call(session, web["id"], allow_id, "result", text="row 1 lit")
    events = await api.wait_for(session, run_over)
    final = of_type(events, "message_assistant")[-1]["message"]["content"][0]["data"]["text"]
    assert final.splitlines() == [
        "client__web__highlight_row: row 1 lit",
        "client__web__highlight_row failed: the user denied this call: not that row",
    ]


@pytest.mark.short_deadlines
async def test_an_approval_is_never_failed_by_a_timer(api: Api) -> None:
    session = await api.session(**GATED)
    await api.register(session)
    await api.send(session, "/call client__web__highlight_row")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    # Three ack deadlines (0.5 s each here) pass: the approval still waits, holding no worker.
    await asyncio.sleep(1.6)
    later = await api.events(session)
    assert later == events
    assert await held_work(api.stack.broker, session.id) == []


async def test_deny_policy_and_cancel_while_waiting(api: Api) -> None:
    session = await api.session(
        client_tool_policies={"client__web__*": "deny", "client__web__highlight_row": "require_approval"}
    )
    await api.register(
        session, tools=[{"name": "highlight_row", "parameters": {}}, {"name": "erase", "parameters": {}}]
    )
    await api.send(session, "/call client__web__erase\n/call client__web__highlight_row")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    refused = of_type(events, "tool_result")[0]
    assert refused["is_error"] is True
    assert "erase" in refused["content"][0]["data"]["text"]
    pending = of_type(events, "approval_requested")[0]["call_id"]
    async with api.as_session(session) as client:
        await client.post(f"/v1/sessions/{session.id}/cancel")
    events = await api.events(session)
    resolved = of_type(events, "approval_resolved")[0]
    assert resolved == resolved | {"call_id": pending, "decision": "deny", "resolved_by": None}
    assert [e["type"] for e in events][-3:] == ["approval_resolved", "tool_result", "run_cancelled"]
    late = await decide(api, session, pending, {"decision": "allow"})
    assert late.status_code == 409


async def test_unknown_call_and_bad_forms(api: Api) -> None:
    session = await api.session()
    assert (await decide(api, session, "call_nope", {"decision": "allow"})).status_code == 404
    bad = await decide(api, session, "call_nope", {"decision": "allow", "message": "stray"})
    assert bad.status_code == 400
    assert (await decide(api, session, "call_nope", {"decision": "maybe"})).status_code == 400
    assert (await decide(api, session, "call_nope", {"decision": "deny", "message": None})).status_code == 404


async def requested(api: Api, session: Session, count: int = 1) -> list[Event]:
    events = await api.wait_for(session, lambda es: len(of_type(es, "approval_requested")) >= count)
    return of_type(events, "approval_requested")


async def test_a_remembered_allow_decides_later_calls_of_the_tool_without_asking(api: Api) -> None:
    session = await api.session(**GATED)
    web = await api.register(session)
    await api.send(session, '/call client__web__highlight_row {"row_id": "1"}')
    (first,) = await requested(api, session)
    allowed = await decide(api, session, first["call_id"], {"decision": "allow", "remember": "session"})
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["remember"] == "session"
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call_id = of_type(events, "client_tool_dispatched")[0]["call_id"]
    assert (await api.call(session, web["id"], call_id, "result", text="ok")).status_code == 204
    await api.wait_for(session, run_over)

    await api.send(session, '/call client__web__highlight_row {"row_id": "2"}')
    events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 2)
    # Asked once only; the second call was decided by the remembered decision, and says so.
    assert len(of_type(events, "approval_requested")) == 1
    second = of_type(events, "approval_resolved")[1]
    assert (second["decision"], second["remembered"]) == ("allow", True)
    assert second["resolved_by"] == allowed.json()["resolved_by"]


async def test_a_remembered_deny_refuses_later_calls_with_the_message(api: Api) -> None:
    session = await api.session(**GATED)
    await api.register(session)
    await api.send(session, '/call client__web__highlight_row {"row_id": "1"}')
    (first,) = await requested(api, session)
    body = {"decision": "deny", "message": "not on this table", "remember": "session"}
    assert (await decide(api, session, first["call_id"], body)).status_code == 200
    await api.wait_for(session, run_over)
    await api.send(session, '/call client__web__highlight_row {"row_id": "2"}')
    events = await api.wait_for(session, lambda es: len(of_type(es, "run_completed")) == 2)
    assert len(of_type(events, "approval_requested")) == 1
    assert not of_type(events, "client_tool_dispatched")
    remembered = of_type(events, "approval_resolved")[1]
    assert (remembered["decision"], remembered["deny_message"], remembered["remembered"]) == (
        "deny",
        "not on this table",
        True,
    )
    result = of_type(events, "tool_result")[1]
    assert result["is_error"] is True
    assert result["content"][0]["data"]["text"] == "the user denied this call: not on this table"


async def test_an_allow_with_edited_arguments_runs_them_and_checks_them_first(api: Api) -> None:
    session = await api.session(**GATED)
    await api.register(session)
    await api.send(session, '/call client__web__highlight_row {"row_id": "1"}')
    (request,) = await requested(api, session)
    bad = await decide(api, session, request["call_id"], {"decision": "allow", "arguments": {"row_id": 5}})
    assert bad.status_code == 400
    assert "row_id" in bad.json()["error"]["message"]
    assert "rule: type" in bad.json()["error"]["message"]
    edited = {"row_id": "9"}
    allowed = await decide(api, session, request["call_id"], {"decision": "allow", "arguments": edited})
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["arguments"] == edited
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert of_type(events, "tool_call")[0]["arguments"] == {"row_id": "1"}
    assert of_type(events, "client_tool_dispatched")[0]["arguments"] == edited


async def test_a_tool_dropped_while_its_call_waited_fails_at_decision(api: Api) -> None:
    session = await api.session(**GATED)
    web = await api.register(session)
    await api.send(session, '/call client__web__highlight_row {"row_id": "1"}')
    (request,) = await requested(api, session)
    other = {"name": "other", "description": "", "parameters": {"type": "object"}}
    async with api.as_session(session) as client:
        replaced = await client.put(f"/v1/sessions/{session.id}/clients/{web['id']}/tools", json={"tools": [other]})
    assert replaced.status_code == 200, replaced.text
    assert (await decide(api, session, request["call_id"], {"decision": "allow"})).status_code == 200
    events = await api.wait_for(session, run_over)
    assert not of_type(events, "client_tool_dispatched")
    (failure,) = of_type(events, "client_tool_failed")
    assert failure["reason"] == "client_gone"
    text = of_type(events, "tool_result")[0]["content"][0]["data"]["text"]
    assert text == "the client no longer offers highlight_row, so the call was not sent"


async def test_approvals_apply_to_per_turn_tools(api: Api) -> None:
    lookup = {"name": "lookup", "description": "Look a thing up", "parameters": {"type": "object"}}
    session = await api.session(client_tool_policies={"lookup": "require_approval"})
    sent = await api.send(session, "/call lookup", client_tools=[lookup])
    (request,) = await requested(api, session)
    assert (request["server"], request["tool"]) == ("client:turn", "lookup")
    assert (await decide(api, session, request["call_id"], {"decision": "allow"})).status_code == 200
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert of_type(events, "client_tool_dispatched")[0]["client_id"] == sent["client_id"]
