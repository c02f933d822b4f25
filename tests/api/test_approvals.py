"""Approvals: require_approval waits (no timer, no worker), the first decision wins, the run goes on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from broker.runs import args_hash
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
