"""`switchboard tools serve`'s member and the calls it runs: progress reported, a failed call stopped, the
person asked (a sync tool blocking on the answer, one the stream lost read back)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator

import pytest

from switchboard import tool_ask
from switchboard.settings import Settings
from switchboard.tool_ask import AskRefused, OpenRequests
from switchboard.tool_member import Member, Target
from switchboard.typed_tools import Call, typed_tool
from tests.api_client import Api, Event, Session, of_type, run_over, running_api, whole_log


@pytest.fixture
async def roomy(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    """Deadlines long enough that only a cancel ends the calls."""
    update: dict[str, object] = {"ack_timeout_s": 10.0, "result_timeout_s": 10.0}
    async with running_api(settings, redis_url, api_key, update) as api:
        yield api


@contextlib.asynccontextmanager
async def serving(member: Member) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(member.serve(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def log(api: Api, session: Session) -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    return await whole_log(lambda params: api.key.get(path, params={**params, "include": "progress"}))


async def cancel(api: Api, session: Session, call_id: str) -> None:
    async with api.as_session(session) as client:
        answer = await client.post(f"/v1/sessions/{session.id}/calls/{call_id}/cancel", json={"message": "stop"})
    assert answer.status_code == 200, answer.text


async def test_an_async_tool_reports_progress_and_is_cancelled_when_its_call_is(roomy: Api) -> None:
    began = asyncio.Event()

    async def long_job(call: Call) -> str:
        """Works for a long time."""
        call.progress("warming up", 0.1)
        began.set()
        await asyncio.sleep(60)
        return "never"

    session = await roomy.session()
    tool = typed_tool(long_job)
    assert "call" not in tool.declaration()["parameters"].get("properties", {})
    registered = await roomy.register(session, name="pool", tools=[tool.declaration()])
    member = Member(Target(roomy.stack.url, session.id, session.token, registered["id"]), {tool.name: tool}, 2)
    async with serving(member):
        await roomy.send(session, "/call client__pool__long_job")
        await asyncio.wait_for(began.wait(), 10)
        events = await roomy.wait_for(session, lambda es: bool(of_type(es, "client_tool_acked")))
        await cancel(roomy, session, of_type(events, "tool_call")[0]["call_id"])
        events = await roomy.wait_for(session, run_over)
        deadline = time.monotonic() + 5
        while member.cancelled == 0:
            assert time.monotonic() < deadline, "the member never stopped the cancelled call"
            await asyncio.sleep(0.05)
    assert member.answered == 0
    events = await log(roomy, session)
    (progress,) = of_type(events, "client_tool_progress")
    assert (progress["message"], progress["fraction"]) == ("warming up", 0.1)
    assert [e["is_error"] for e in of_type(events, "tool_result")] == [True]


async def test_a_sync_tool_sees_its_call_cancelled(roomy: Api) -> None:
    saw_cancel = threading.Event()
    began = threading.Event()

    def careful_job(call: Call) -> str:
        """Checks whether it should stop."""
        began.set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if call.cancelled:
                saw_cancel.set()
                return "stopped"
            time.sleep(0.02)
        return "finished"

    session = await roomy.session()
    tool = typed_tool(careful_job)
    registered = await roomy.register(session, name="pool", tools=[tool.declaration()])
    member = Member(Target(roomy.stack.url, session.id, session.token, registered["id"]), {tool.name: tool}, 1)
    async with serving(member):
        await roomy.send(session, "/call client__pool__careful_job")
        await asyncio.to_thread(began.wait, 10)
        events = await roomy.wait_for(session, lambda es: bool(of_type(es, "client_tool_acked")))
        await cancel(roomy, session, of_type(events, "tool_call")[0]["call_id"])
        assert await asyncio.to_thread(saw_cancel.wait, 5)
        await roomy.wait_for(session, run_over)
    assert member.answered == 0


FORM = {"type": "object", "properties": {"account": {"type": "string", "enum": ["checking", "savings"]}}}


async def asked(api: Api, session: Session) -> Event:
    path = f"/v1/sessions/{session.id}/events"
    for _ in range(500):
        events = await whole_log(lambda params: api.key.get(path, params={**params, "include": "extensions"}))
        if of_type(events, "input_requested"):
            return of_type(events, "input_requested")[0]
        await asyncio.sleep(0.02)
    raise AssertionError("the tool never asked")


async def answer(api: Api, session: Session, request_id: str, body: dict[str, object]) -> None:
    async with api.as_session(session) as client:
        answered = await client.post(f"/v1/sessions/{session.id}/input-requests/{request_id}", json=body)
    assert answered.status_code == 200, answered.text


async def test_a_sync_tool_asks_and_blocks_until_the_answer_even_one_the_stream_lost(
    roomy: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The live frame lost (a reconnect at the wrong moment): the member reads the request back.
    monkeypatch.setattr(OpenRequests, "heard", lambda self, event: None)
    monkeypatch.setattr(tool_ask, "READ_BACK_S", 0.2)

    def pick_account(call: Call) -> str:
        """Asks which account."""
        answer = call.ask_sync("Which account?", FORM, key="account")
        return f"{answer.action}: {answer.content}"

    session = await roomy.session()
    tool = typed_tool(pick_account)
    registered = await roomy.register(session, name="pool", tools=[tool.declaration()])
    member = Member(Target(roomy.stack.url, session.id, session.token, registered["id"]), {tool.name: tool}, 1)
    async with serving(member):
        await roomy.send(session, "/call client__pool__pick_account")
        request = await asked(roomy, session)
        assert (request["key"], request["schema"]) == ("account", FORM)
        await answer(roomy, session, request["request_id"], {"action": "accept", "content": {"account": "savings"}})
        events = await roomy.wait_for(session, run_over, timeout=10)
    [result] = of_type(events, "tool_result")
    assert result["content"][0]["data"]["text"] == "accept: {'account': 'savings'}"


async def test_a_refused_ask_is_the_tools_error_and_a_cancelled_call_ends_a_sync_ask(roomy: Api) -> None:
    refused: list[AskRefused] = []
    ended: list[BaseException] = []

    async def bad_form(call: Call) -> str:
        """Asks with a form no host can show."""
        try:
            await call.ask("Which?", {"type": "object", "properties": {"nested": {"type": "object"}}})
        except AskRefused as error:
            refused.append(error)
            raise
        return "never"

    def waits(call: Call) -> str:
        """Asks, and is cancelled meanwhile."""
        try:
            call.ask_sync("Still there?", FORM)
        except RuntimeError as error:
            ended.append(error)
        return "ignored"

    session = await roomy.session()
    tools = {t.name: t for t in (typed_tool(bad_form), typed_tool(waits))}
    declared = [t.declaration() for t in tools.values()]
    registered = await roomy.register(session, name="pool", tools=declared)
    member = Member(Target(roomy.stack.url, session.id, session.token, registered["id"]), tools, 1)
    async with serving(member):
        await roomy.send(session, "/call client__pool__bad_form")
        events = await roomy.wait_for(session, run_over, timeout=10)
        [result] = of_type(events, "tool_result")
        assert result["is_error"]
        assert refused[0].status == 400
        assert "schema.properties.nested" in str(refused[0])

        await roomy.send(session, "/call client__pool__waits")
        request = await asked(roomy, session)
        await cancel(roomy, session, request["call_id"])
        deadline = time.monotonic() + 5
        while not ended:
            assert time.monotonic() < deadline, "the sync ask never ended with its call"
            await asyncio.sleep(0.05)
    assert str(ended[0]) == "the call failed while it waited for an answer"
