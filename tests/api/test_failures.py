"""Every way a call can fail ends in client_tool_failed, then an error tool_result, and the run goes on."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.api_client import Api, Event, Session, of_type, run_over, types

pytestmark = pytest.mark.both_redis

CALL = '/call client__web__highlight_row {"row_id": "7"}'


def failed_then_result(events: list[Event], reason: str) -> Event:
    """The failure event, checked to be followed by the call's error result, and a completed run."""
    failure = of_type(events, "client_tool_failed")[0]
    assert failure["reason"] == reason
    index = events.index(failure)
    result = events[index + 1]
    assert result["type"] == "tool_result"
    assert result["call_id"] == failure["call_id"]
    assert result["is_error"] is True
    assert of_type(events, "run_completed")
    final = of_type(events, "message_assistant")[-1]["message"]["content"][0]["data"]["text"]
    assert final.startswith("client__web__highlight_row failed: ")
    return failure


async def dispatched(api: Api, session: Session, count: int = 1) -> list[Event]:
    events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) >= count)
    return of_type(events, "client_tool_dispatched")


@pytest.mark.short_deadlines
async def test_no_ack_in_time_fails_with_ack_timeout(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    events = await api.wait_for(session, run_over)
    failure = failed_then_result(events, "ack_timeout")
    assert failure["client_id"] == web["id"]
    assert (
        "did not acknowledge the call within 0.5 s" in events[events.index(failure) + 1]["content"][0]["data"]["text"]
    )
    late = await api.call(session, web["id"], call["call_id"], "ack")
    assert late.status_code == 409
    assert late.json()["error"]["message"] == f"call {call['call_id']} failed: ack_timeout"


@pytest.mark.short_deadlines
async def test_no_result_after_ack_fails_with_result_timeout(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    assert (await api.call(session, web["id"], call["call_id"], "ack")).status_code == 200
    # The ack deadline (0.5 s) passes; the result deadline (1 s after the ack) is what fires.
    events = await api.wait_for(session, run_over)
    failed_then_result(events, "result_timeout")
    acked = of_type(events, "client_tool_acked")[0]
    failure = of_type(events, "client_tool_failed")[0]
    assert events.index(acked) < events.index(failure)
    late = await api.call(session, web["id"], call["call_id"], "result", text="too late")
    assert late.status_code == 409
    assert "result_timeout" in late.json()["error"]["message"]


async def test_leaving_with_calls_owed_fails_them_with_client_gone(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    async with api.as_session(session) as client:
        left = await client.delete(f"/v1/sessions/{session.id}/clients/{web['id']}")
        assert left.status_code == 204
        again = await client.delete(f"/v1/sessions/{session.id}/clients/{web['id']}")
        assert again.status_code == 204
    events = await api.wait_for(session, run_over)
    left_event = of_type(events, "client_left")[0]
    assert left_event == left_event | {"client_id": web["id"], "reason": "departed"}
    failure = failed_then_result(events, "client_gone")
    assert failure["call_id"] == call["call_id"]
    assert events.index(left_event) < events.index(failure)


@pytest.mark.short_deadlines
async def test_a_lapsed_ttl_fails_owed_calls_and_refuses_pings(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, ttl=5)
    await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    assert (await api.call(session, web["id"], call["call_id"], "ack")).status_code == 200
    # Keep the call alive past its result deadline is not possible, so answer nothing and let the lease go:
    # the 1 s result deadline fires first; the lapse still ends the registration at 5 s.
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_left")), timeout=8)
    left = of_type(events, "client_left")[0]
    assert left == left | {"client_id": web["id"], "reason": "timed_out"}
    async with api.as_session(session) as client:
        ping = await client.post(f"/v1/sessions/{session.id}/clients/{web['id']}/ping")
    assert ping.status_code == 404
    assert ping.json()["error"]["code"] == "not_found"


async def test_cancel_while_waiting_fails_owed_calls_with_run_gone(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    sent = await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    async with api.as_session(session) as client:
        cancelled = await client.post(f"/v1/sessions/{session.id}/cancel")
        assert cancelled.status_code == 200
        assert cancelled.json() == {"run_id": sent["run_id"]}
        idle = await client.post(f"/v1/sessions/{session.id}/cancel")
        assert idle.json() == {"run_id": None}
    events = await api.events(session)
    failure = of_type(events, "client_tool_failed")[0]
    assert failure["reason"] == "run_gone"
    assert types(events)[-3:] == ["client_tool_failed", "tool_result", "run_cancelled"]
    assert of_type(events, "run_cancelled")[0]["run_id"] == sent["run_id"]
    late = await api.call(session, web["id"], call["call_id"], "result", text="late")
    assert late.status_code == 409


async def test_cancel_during_a_model_step_ends_at_the_next_checkpoint(api: Api) -> None:
    session = await api.session()
    sent = await api.send(session, "/sleep 30")
    await api.wait_for(session, lambda es: bool(of_type(es, "run_started")))
    async with api.as_session(session) as client:
        assert (await client.post(f"/v1/sessions/{session.id}/cancel")).json() == {"run_id": sent["run_id"]}
    events = await api.wait_for(session, run_over, timeout=2)
    assert types(events)[-1] == "run_cancelled"
    assert "message_assistant" not in types(events)


@pytest.mark.short_deadlines
async def test_a_result_racing_its_deadline_has_exactly_one_outcome(api: Api) -> None:
    outcomes: list[int] = []
    for _ in range(4):
        session = await api.session()
        web = await api.register(session)
        await api.send(session, CALL)
        (call,) = await dispatched(api, session)
        # Answer right around the 0.5 s ack deadline.
        await asyncio.sleep(0.45)
        answer = await api.call(session, web["id"], call["call_id"], "result", text="photo finish")
        outcomes.append(answer.status_code)
        events = await api.wait_for(session, run_over)
        results = of_type(events, "tool_result")
        assert len(results) == 1
        assert (answer.status_code == 204) == (not results[0]["is_error"])
        assert (answer.status_code == 409) == bool(of_type(events, "client_tool_failed"))
    assert set(outcomes) <= {204, 409}


async def test_deleting_the_session_ends_the_run_for_live_observers(api: Api) -> None:
    session = await api.session()
    await api.register(session)
    await api.send(session, CALL)
    await dispatched(api, session)
    seen: list[Event] = []
    async with api.stream(session, after_seq=0) as frames:
        deleted = await api.key.delete(f"/v1/sessions/{session.id}")
        assert deleted.status_code == 204
        # The stream delivers the run's end, then closes: the session is gone.
        with contextlib.suppress(EOFError):
            while True:
                seen.append(await frames.event())
    async with api.as_session(session) as client:
        reconnect = await client.get(f"/v1/sessions/{session.id}/events/stream", params={"after_seq": 0})
        assert reconnect.status_code == 404
    assert types(seen)[-3:] == ["client_tool_failed", "tool_result", "run_cancelled"]
    assert seen[-3]["reason"] == "run_gone"
