"""The delegation helper: a turn with per-turn tools served by a callback (the first seed's `chat()`)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from delegate import ChatResult, ClientTool, ToolCallRequest, chat
from switchboard.settings import Settings
from tests.api_client import Api, Session, of_type, run_over, running_api

TIMEZONE = ClientTool("get_timezone", "The caller's time zone", {"type": "object"})


async def delegate(api: Api, session: Session, text: str, **options: Any) -> ChatResult:
    return await asyncio.wait_for(chat(api.stack.url, session.id, session.token, text, **options), 10)


async def test_the_callback_answers_and_the_final_message_comes_back(api: Api) -> None:
    session = await api.session()
    calls: list[ToolCallRequest] = []
    seen: list[str] = []

    async def answer(call: ToolCallRequest) -> dict[str, str]:
        calls.append(call)
        return {"tz": "Europe/Paris"}

    result = await delegate(
        api,
        session,
        '/call get_timezone {"precise": true}',
        client_tools=[TIMEZONE],
        on_client_tool_call=answer,
        on_event=lambda event: seen.append(event["type"]),
    )
    assert result.outcome == "completed"
    assert result.text == 'get_timezone: {"tz": "Europe/Paris"}'
    assert [(c.tool_name, c.input) for c in calls] == [("get_timezone", {"precise": True})]
    assert calls[0].tool_call_id.startswith("call_")
    assert "client_tool_dispatched" in seen
    assert seen[-1] == "run_completed"


async def test_a_plain_function_and_a_string_answer(api: Api) -> None:
    session = await api.session()
    result = await delegate(
        api, session, "/call get_timezone", client_tools=[TIMEZONE], on_client_tool_call=lambda call: "UTC+1"
    )
    assert result.text == "get_timezone: UTC+1"


async def test_an_exception_becomes_an_error_result_and_the_run_goes_on(api: Api) -> None:
    session = await api.session()

    def broken(call: ToolCallRequest) -> str:
        raise RuntimeError("the clock is gone")

    result = await delegate(api, session, "/call get_timezone", client_tools=[TIMEZONE], on_client_tool_call=broken)
    assert result.outcome == "completed"
    assert result.text == "get_timezone failed: the clock is gone"


@pytest.mark.short_deadlines
async def test_without_a_callback_the_calls_run_into_their_ack_deadline(api: Api) -> None:
    session = await api.session()
    result = await delegate(api, session, "/call get_timezone", client_tools=[TIMEZONE])
    assert result.outcome == "completed"
    assert result.text == "get_timezone failed: the client did not acknowledge the call within 0.5 s"


async def test_cancel_stops_the_run_and_the_callback_still_running(api: Api) -> None:
    session = await api.session()
    cancel = asyncio.Event()
    finished = asyncio.Event()
    stopped = asyncio.Event()

    async def slow(call: ToolCallRequest) -> str:
        cancel.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            stopped.set()
            raise
        finished.set()
        return "too late"

    result = await delegate(
        api, session, "/call get_timezone", client_tools=[TIMEZONE], on_client_tool_call=slow, cancel=cancel
    )
    assert result.outcome == "cancelled"
    # Its call failed with the run (run_gone), so the callback was cancelled rather than waited for.
    assert stopped.is_set()
    assert not finished.is_set()
    failed = [e for e in result.events if e["type"] == "client_tool_failed"]
    assert [f["reason"] for f in failed] == ["run_gone"]


async def test_a_crashed_delegators_calls_fail_with_client_gone_within_its_lease(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    # Deadlines far past the lease, so only the lease can end the call.
    update: dict[str, object] = {"ack_timeout_s": 30.0, "result_timeout_s": 30.0}
    async with running_api(settings, redis_url, api_key, update) as roomy:
        session = await roomy.session()
        # What chat() posts, from a delegator that then dies: nobody pings its run-scoped client.
        tools = [dataclasses.asdict(TIMEZONE)]
        sent = await roomy.send(session, "/call get_timezone", client_tools=tools, client_tools_ttl_s=5)
        scoped = sent["client_id"]
        events = await roomy.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
        call_id = of_type(events, "client_tool_dispatched")[0]["call_id"]
        assert (await roomy.call(session, scoped, call_id, "ack")).status_code == 200
        events = await roomy.wait_for(session, run_over, timeout=9)
    (failure,) = of_type(events, "client_tool_failed")
    assert (failure["client_id"], failure["reason"]) == (scoped, "client_gone")
    (left,) = of_type(events, "client_left")
    assert left["reason"] == "timed_out"


async def test_a_lease_without_client_tools_is_refused(api: Api) -> None:
    session = await api.session()
    async with api.as_session(session) as client:
        body = {"type": "input", "text": "hi", "client_tools_ttl_s": 30}
        refused = await client.post(f"/v1/sessions/{session.id}/events", json=body)
    assert refused.status_code == 400
    assert "client_tools_ttl_s" in refused.json()["error"]["message"]


async def test_a_run_that_fails_reports_its_error(api: Api) -> None:
    session = await api.session()
    result = await delegate(api, session, "/fail nope")
    assert (result.outcome, result.error, result.text) == ("failed", "nope", "")
