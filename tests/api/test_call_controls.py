"""Client calls that last: progress, per-tool deadlines, cancelling one call, arguments checked first."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.api_client import Api, Event, Session, of_type, run_over, whole_log
from tests.helpers import HIGHLIGHT

pytestmark = pytest.mark.both_redis

CALL = '/call client__web__highlight_row {"row_id": "7"}'


def tool(**deadlines: int) -> dict[str, Any]:
    return {**HIGHLIGHT, **deadlines}


async def dispatched(api: Api, session: Session, count: int = 1) -> list[Event]:
    events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) >= count)
    return of_type(events, "client_tool_dispatched")


async def with_progress(api: Api, session: Session) -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    return await whole_log(lambda params: api.key.get(path, params={**params, "include": "progress"}))


def result_text(events: list[Event], call_id: str) -> str:
    (result,) = [e for e in of_type(events, "tool_result") if e["call_id"] == call_id]
    assert result["is_error"] is True
    text: str = result["content"][0]["data"]["text"]
    return text


async def test_progress_is_logged_for_readers_that_ask_and_refused_outside_an_acked_call(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    other = await api.register(session, name="other")
    await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    call_id = call["call_id"]
    early = await api.call(session, web["id"], call_id, "progress", message="starting")
    assert early.status_code == 409
    assert "not acknowledged yet" in early.json()["error"]["message"]
    assert (await api.call(session, web["id"], call_id, "ack")).status_code == 200

    sent = await api.call(session, web["id"], call_id, "progress", message="halfway", fraction=0.5)
    assert sent.status_code == 200, sent.text
    event = sent.json()
    assert (event["type"], event["client_id"], event["call_id"]) == ("client_tool_progress", web["id"], call_id)
    assert (event["message"], event["fraction"]) == ("halfway", 0.5)
    bare = await api.call(session, web["id"], call_id, "progress")
    assert bare.status_code == 200
    assert (bare.json()["message"], bare.json()["fraction"]) == (None, None)

    for bad in ({"fraction": 1.5}, {"fraction": -0.1}, {"message": "x" * 1001}, {"percent": 3}):
        refused = await api.call(session, web["id"], call_id, "progress", **bad)
        assert refused.status_code == 400, bad
        assert refused.json()["error"]["code"] == "invalid_request"
    assert (await api.call(session, other["id"], call_id, "progress", message="mine")).status_code == 404
    assert (await api.call(session, web["id"], "call_unknown", "progress", message="?")).status_code == 404

    assert (await api.call(session, web["id"], call_id, "result", text="done")).status_code == 204
    late = await api.call(session, web["id"], call_id, "progress", message="late")
    assert late.status_code == 409
    assert "already has a result" in late.json()["error"]["message"]

    events = await api.wait_for(session, run_over)
    assert not of_type(events, "client_tool_progress")
    shown = of_type(await with_progress(api, session), "client_tool_progress")
    assert [(e["message"], e["fraction"]) for e in shown] == [("halfway", 0.5), (None, None)]


@pytest.mark.short_deadlines
async def test_a_heartbeat_keeps_a_long_call_alive_until_it_stops(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[tool(heartbeat_s=1, timeout_s=60)])
    await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    assert (await api.call(session, web["id"], call["call_id"], "ack")).status_code == 200
    # Well past the deployment's result deadline (1 s in the tests), kept alive by progress.
    for _ in range(6):
        await asyncio.sleep(0.4)
        assert (await api.call(session, web["id"], call["call_id"], "progress")).status_code == 200
    assert not of_type(await api.events(session), "client_tool_failed")
    events = await api.wait_for(session, run_over, timeout=5)
    (failure,) = of_type(events, "client_tool_failed")
    assert failure["reason"] == "result_timeout"
    assert "heartbeat_s" in result_text(events, call["call_id"])


@pytest.mark.short_deadlines
async def test_a_tool_timeout_replaces_the_deployments_result_deadline(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[tool(timeout_s=4)])
    listed = (await api.key.get(f"/v1/sessions/{session.id}/clients")).json()["items"]
    assert listed[0]["tools"][0]["timeout_s"] == 4
    assert "heartbeat_s" not in listed[0]["tools"][0]
    await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    assert (await api.call(session, web["id"], call["call_id"], "ack")).status_code == 200
    await asyncio.sleep(1.6)
    assert (await api.call(session, web["id"], call["call_id"], "result", text="slow but fine")).status_code == 204
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_completed")
    assert not of_type(events, "client_tool_failed")


async def test_a_short_tool_timeout_fails_the_call_saying_so(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[tool(timeout_s=1)])
    await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    assert (await api.call(session, web["id"], call["call_id"], "ack")).status_code == 200
    events = await api.wait_for(session, run_over)
    assert of_type(events, "client_tool_failed")[0]["reason"] == "result_timeout"
    assert "within 1 s (the tool's timeout_s)" in result_text(events, call["call_id"])


@pytest.mark.parametrize(
    "deadlines",
    [{"timeout_s": 0}, {"timeout_s": 2_592_001}, {"heartbeat_s": 0}, {"heartbeat_s": 2_592_001}, {"ttl": 5}],
)
async def test_deadlines_out_of_range_or_unknown_keys_are_refused(api: Api, deadlines: dict[str, int]) -> None:
    session = await api.session()
    body = {"name": "web", "lifetime": {"type": "never"}, "tools": [tool(**deadlines)]}
    async with api.as_session(session) as client:
        refused = await client.post(f"/v1/sessions/{session.id}/clients", json=body)
    assert refused.status_code == 400
    assert next(iter(deadlines)) in refused.json()["error"]["message"]


async def test_cancelling_one_call_fails_it_and_the_run_goes_on(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, f'{CALL}\n/call client__web__highlight_row {{"row_id": "8"}}')
    first, second = await dispatched(api, session, 2)
    assert (await api.call(session, web["id"], first["call_id"], "ack")).status_code == 200
    path = f"/v1/sessions/{session.id}/calls/{first['call_id']}/cancel"
    async with api.as_session(session) as client:
        cancelled = await client.post(path, json={"message": "the user pressed Stop"})
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json() == {
            "call_id": first["call_id"],
            "state": "failed",
            "reason": "run_gone",
            "detail": "cancelled",
        }
        again = await client.post(path)
        assert again.status_code == 409
        unknown = await client.post(f"/v1/sessions/{session.id}/calls/call_nope/cancel")
        assert unknown.status_code == 404
        too_long = await client.post(path, json={"message": "x" * 1001})
        assert too_long.status_code == 400
    late = await api.call(session, web["id"], first["call_id"], "result", text="too late")
    assert late.status_code == 409
    assert not of_type(await api.events(session), "run_completed")
    assert (await api.call(session, web["id"], second["call_id"], "result", text="ok")).status_code == 204

    events = await api.wait_for(session, run_over)
    (failure,) = of_type(events, "client_tool_failed")
    assert (failure["call_id"], failure["reason"], failure["detail"]) == (first["call_id"], "run_gone", "cancelled")
    assert "the user pressed Stop" in result_text(events, first["call_id"])
    assert of_type(events, "run_completed")


async def test_an_api_key_without_session_manage_cannot_cancel(api: Api) -> None:
    session = await api.session()
    await api.register(session)
    await api.send(session, CALL)
    (call,) = await dispatched(api, session)
    minted = await api.key.post("/v1/api-keys", json={"label": "reader", "permissions": ["session.read"]})
    assert minted.status_code == 201, minted.text
    headers = {"Authorization": f"Bearer {minted.json()['secret']}"}
    refused = await api.key.post(f"/v1/sessions/{session.id}/calls/{call['call_id']}/cancel", headers=headers)
    assert refused.status_code == 403


async def test_arguments_that_fail_the_schema_or_are_not_json_are_never_dispatched(api: Api) -> None:
    session = await api.session()
    await api.register(session)
    await api.send(session, '/call client__web__highlight_row {"row_id": 7}\n/call client__web__highlight_row {nope')
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_completed")
    assert not of_type(events, "client_tool_dispatched")
    first, second = (e["call_id"] for e in of_type(events, "tool_call"))
    schema_text = result_text(events, first)
    assert "row_id" in schema_text
    assert "rule: type" in schema_text
    assert "not valid JSON" in result_text(events, second)


async def test_a_tool_whose_nested_schema_is_broken_registers_and_its_calls_fail_saying_so(api: Api) -> None:
    # Registration checks the top level of `parameters` only (what the OpenAPI document can state), so
    # a broken nested schema shows when a call is checked against it: an error result, the run goes on.
    session = await api.session()
    broken = {**HIGHLIGHT, "parameters": {"type": "object", "properties": {"row_id": {"type": 5}}}}
    await api.register(session, tools=[broken])
    await api.send(session, '/call client__web__highlight_row {"row_id": "7"}')
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_completed")
    assert not of_type(events, "client_tool_dispatched")
    [call] = of_type(events, "tool_call")
    assert "the tool's parameters schema cannot be applied" in result_text(events, call["call_id"])
