"""The delegation helper: a turn with per-turn tools served by a callback (the first seed's `chat()`)."""

from __future__ import annotations

import asyncio
from typing import Any

from delegate import ChatResult, ClientTool, ToolCallRequest, chat
from tests.api_client import Api, Session

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


async def test_without_a_callback_the_calls_run_into_their_ack_deadline(api: Api) -> None:
    session = await api.session()
    result = await delegate(api, session, "/call get_timezone", client_tools=[TIMEZONE])
    assert result.outcome == "completed"
    assert result.text == "get_timezone failed: the client did not acknowledge the call within 0.5 s"


async def test_cancel_stops_the_run_but_not_a_callback_already_running(api: Api) -> None:
    session = await api.session()
    cancel = asyncio.Event()
    finished = asyncio.Event()

    async def slow(call: ToolCallRequest) -> str:
        cancel.set()
        await asyncio.sleep(0.3)
        finished.set()
        return "too late"

    result = await delegate(
        api, session, "/call get_timezone", client_tools=[TIMEZONE], on_client_tool_call=slow, cancel=cancel
    )
    assert result.outcome == "cancelled"
    # chat() returned only once the callback had finished: it was not interrupted.
    assert finished.is_set()
    failed = [e for e in result.events if e["type"] == "client_tool_failed"]
    assert [f["reason"] for f in failed] == ["run_gone"]


async def test_a_run_that_fails_reports_its_error(api: Api) -> None:
    session = await api.session()
    result = await delegate(api, session, "/fail nope")
    assert (result.outcome, result.error, result.text) == ("failed", "nope", "")
