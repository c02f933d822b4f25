"""Approvals with a deadline (a policy's approval_timeout_s): one nobody decides in time resolves as a deny
with reason `timeout`, the model reads the error result and the run goes on; a person's decision first
leaves no timer behind; exactly one approval_resolved either way; without one an approval waits for ever."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.api.test_session_mcp import LOOKUP, mcp_client, text
from tests.api_client import Api, Event, Session, of_type, run_over

pytestmark = pytest.mark.both_redis

TOOL = "client__web__highlight_row"
CALL = f'/call {TOOL} {{"row_id": "7"}}'


def gated(seconds: int) -> dict[str, Any]:
    return {"client_tool_policies": {TOOL: {"policy": "require_approval", "approval_timeout_s": seconds}}}


async def requested(api: Api, session: Session) -> Event:
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    return of_type(events, "approval_requested")[0]


async def decide(api: Api, session: Session, call_id: str, body: dict[str, Any]) -> Any:
    async with api.as_session(session) as client:
        return await client.post(f"/v1/sessions/{session.id}/approvals/{call_id}", json=body)


async def deadline_of(api: Api, session: Session, call_id: str) -> float | None:
    """The call's timer in its partition's deadline index (None: no timer)."""
    core = api.stack.broker.core
    part = core.keys.session(session.id).partition
    score = await core.client_for(part.deadlines).zscore(part.deadlines, core.keys.member(session.id, call_id))
    return None if score is None else float(score)


def tool_results(events: list[Event], call_id: str) -> list[Event]:
    return [e for e in of_type(events, "tool_result") if e["call_id"] == call_id]


async def test_an_approval_nobody_decides_resolves_as_a_deny_and_the_run_goes_on(api: Api) -> None:
    session = await api.session(**gated(1))
    await api.register(session)
    await api.send(session, CALL)
    request = await requested(api, session)
    assert await deadline_of(api, session, request["call_id"]) is not None
    events = await api.wait_for(session, run_over, timeout=10)
    (resolved,) = of_type(events, "approval_resolved")
    assert resolved | {"seq": 0, "created_at": ""} == {
        "seq": 0,
        "created_at": "",
        "type": "approval_resolved",
        "call_id": request["call_id"],
        "decision": "deny",
        "deny_message": "no decision within 1 s (the policy's approval_timeout_s)",
        "resolved_by": None,
        "reason": "timeout",
    }
    (result,) = tool_results(events, request["call_id"])
    assert result["is_error"] is True
    assert "denied" in result["content"][0]["data"]["text"]
    assert of_type(events, "run_completed")
    assert not of_type(events, "client_tool_dispatched")
    assert await deadline_of(api, session, request["call_id"]) is None


async def test_a_decision_first_drops_the_timer_and_only_it_is_resolved(api: Api) -> None:
    session = await api.session(**gated(2))
    web = await api.register(session)
    await api.send(session, CALL)
    request = await requested(api, session)
    allowed = await decide(api, session, request["call_id"], {"decision": "allow"})
    assert allowed.status_code == 200, allowed.text
    assert "reason" not in allowed.json()
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    dispatched = of_type(events, "client_tool_dispatched")[0]
    # The call's own ack deadline replaced the approval's.
    assert await deadline_of(api, session, request["call_id"]) is not None
    await asyncio.sleep(2.5)
    assert (await api.call(session, web["id"], dispatched["call_id"], "ack")).status_code == 200
    assert (await api.call(session, web["id"], dispatched["call_id"], "result", text="done")).status_code == 204
    events = await api.wait_for(session, run_over)
    assert len(of_type(events, "approval_resolved")) == 1
    assert of_type(events, "run_completed")


async def test_a_deny_first_is_the_only_resolution(api: Api) -> None:
    session = await api.session(**gated(1))
    await api.register(session)
    await api.send(session, CALL)
    request = await requested(api, session)
    denied = await decide(api, session, request["call_id"], {"decision": "deny", "message": "no"})
    assert denied.status_code == 200
    assert await deadline_of(api, session, request["call_id"]) is None
    await asyncio.sleep(1.5)
    events = await api.wait_for(session, run_over)
    (resolved,) = of_type(events, "approval_resolved")
    assert resolved["deny_message"] == "no"
    assert "reason" not in resolved


async def race_once(api: Api, offset_s: float) -> None:
    session = await api.session(**gated(1))
    await api.register(session)
    await api.send(session, CALL)
    call_id = (await requested(api, session))["call_id"]
    due = await deadline_of(api, session, call_id)
    assert due is not None
    await asyncio.sleep(max(0.0, due / 1000 + offset_s - time.time()))
    outcomes = await asyncio.gather(
        decide(api, session, call_id, {"decision": "allow"}),
        *(api.stack.broker.timers.expire_call(session.id, call_id) for _ in range(3)),
    )
    decided = outcomes[0].status_code
    assert decided in (200, 409), outcomes[0].text
    # The timekeeper may have resolved it itself: then none of these did.
    denied = outcomes[1:].count("denied")
    assert denied <= 1
    assert not (decided == 200 and denied)

    def settled(events: list[Event]) -> bool:
        return bool(tool_results(events, call_id) or of_type(events, "client_tool_dispatched"))

    events = await api.wait_for(session, settled)
    await asyncio.sleep(0.3)
    events = await api.events(session)
    (resolved,) = of_type(events, "approval_resolved")
    if resolved["decision"] == "allow":
        assert decided == 200
        assert len(of_type(events, "client_tool_dispatched")) == 1
        assert not tool_results(events, call_id)
    else:
        assert (resolved["reason"], decided) == ("timeout", 409)
        assert len(tool_results(events, call_id)) == 1
        assert not of_type(events, "client_tool_dispatched")


async def test_the_deadline_and_a_person_racing_resolve_it_exactly_once(api: Api) -> None:
    """About the deadline, a person's decision and the timer's script (three times over, as the timekeeper
    and late duplicates would, besides the timekeeper itself) race: exactly one approval_resolved, and
    exactly what it decided follows."""
    await asyncio.gather(*(race_once(api, offset) for offset in (-0.02, -0.005, 0.0, 0.002, 0.01, 0.03)))


async def test_without_a_deadline_an_approval_has_no_timer(api: Api) -> None:
    session = await api.session(client_tool_policies={TOOL: "require_approval"})
    await api.register(session)
    await api.send(session, CALL)
    request = await requested(api, session)
    assert await deadline_of(api, session, request["call_id"]) is None
    session = await api.session(client_tool_policies={TOOL: {"policy": "require_approval"}})
    await api.register(session)
    await api.send(session, CALL)
    request = await requested(api, session)
    assert await deadline_of(api, session, request["call_id"]) is None


async def test_a_server_tool_approval_runs_out_the_same_way(api: Api) -> None:
    policy = {"policy": "require_approval", "approval_timeout_s": 1}
    session = await api.session(server_tools=["calculate"], server_tool_policies={"calc*": policy})
    await api.send(session, '/call calculate {"expression": "1 + 1"}')
    request = await requested(api, session)
    events = await api.wait_for(session, run_over, timeout=10)
    (resolved,) = of_type(events, "approval_resolved")
    assert (resolved["reason"], resolved["call_id"]) == ("timeout", request["call_id"])
    assert tool_results(events, request["call_id"])[0]["is_error"] is True
    assert of_type(events, "run_completed")


async def test_a_session_mcp_call_waiting_for_approval_runs_out_the_same_way(api: Api) -> None:
    policy = {"policy": "require_approval", "approval_timeout_s": 1}
    session = await api.session(client_tool_policies={"client__web__lookup": policy})
    await api.register(session, tools=[LOOKUP])
    async with mcp_client(api, session) as client:
        result = await asyncio.wait_for(client.call_tool("client__web__lookup", {"word": "later"}), 10)
    assert result.is_error
    assert "no decision within 1 s" in text(result)
    events = await api.events(session)
    (resolved,) = of_type(events, "approval_resolved")
    assert (resolved["decision"], resolved["reason"]) == ("deny", "timeout")
    assert not of_type(events, "client_tool_dispatched")
