"""What a session token can make the front doors (AG-UI, the AI SDK's UI message stream) do with a refused
request: nothing. A request refused at the stream caps records none of the tool results it carries, and a
body past the doors' bounds is a 400 naming the field and the limit, with nothing written. An answer whose
room in the session another request took meanwhile is a 409 naming the limit, its call still owed.

The cost of refusing such bodies is measured by the benchmark (`python -m bench --only doors`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from api.doors.ag_ui_input import MAX_CONTEXT, MAX_TAIL
from api.doors.answers import MAX_ANSWERS
from api.doors.bodies import MAX_MESSAGES, MAX_PARTS
from broker.errors import Conflict
from broker.services.clients import MAX_ACTIVE_CLIENTS, Clients
from switchboard.settings import Settings
from tests.api_client import Api, Session, of_type, running_api
from tests.sse import Frames

PICK = {
    "name": "pick_color",
    "description": "Ask the user to pick a color.",
    "parameters": {"type": "object", "properties": {"color": {"type": "string"}}},
}
CALL_PICK = '/call pick_color {"color": "red"}'


def _ag_ui(session: Session) -> str:
    return f"/v1/sessions/{session.id}/ag-ui"


def _ai_sdk(session: Session) -> str:
    return f"/v1/sessions/{session.id}/ai-sdk/chat"


def _run_input(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"threadId": "t", "runId": "r", "messages": list(messages), **extra}


def _chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "c", "messages": list(messages), "trigger": "submit-message", **extra}


def _user(text: str, message_id: str = "u1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def _ui_user(text: str) -> dict[str, Any]:
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}


@contextlib.asynccontextmanager
async def _opened(client: httpx.AsyncClient, method: str, path: str, body: Any = None) -> AsyncIterator[httpx.Response]:
    """A stream, once the caps let it open: the server counts a stream out only after the client has
    read its end, so the next one may find it still counted for a moment."""
    for _ in range(100):
        async with client.stream(method, path, json=body) as answer:
            if answer.status_code != 429:
                assert answer.status_code == 200, await answer.aread()
                yield answer
                return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{method} {path}: still 429 after 2 s")


async def _stream(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A door's answer to `body`, read to its end: its events (AG-UI) or chunks (AI SDK)."""
    found: list[dict[str, Any]] = []
    async with _opened(client, "POST", path, body) as answer:
        frames = Frames(answer)
        with contextlib.suppress(EOFError):
            while True:
                frame = await frames.next(timeout=10)
                if frame.data and frame.data != ["[DONE]"]:
                    found.append(frame.event)
    return found


async def _ag_ui_call(client: httpx.AsyncClient, session: Session) -> str:
    """An AG-UI run that ends on a call of the frontend's tool: the call's id."""
    events = await _stream(client, _ag_ui(session), _run_input(_user(CALL_PICK), tools=[PICK]))
    (call_id,) = events[-1]["outcome"]["pendingToolCallIds"]
    return str(call_id)


async def _ai_sdk_call(client: httpx.AsyncClient, session: Session) -> tuple[str, str]:
    """A UI message stream that ends on a call of the frontend's tool: the message's id and the call's."""
    chunks = await _stream(client, _ai_sdk(session), _chat(_ui_user(CALL_PICK), tools=[PICK]))
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}, chunks
    (call_id,) = [c["toolCallId"] for c in chunks if c["type"] == "tool-input-available"]
    return str(chunks[0]["messageId"]), str(call_id)


def _ag_ui_answer(call_id: str) -> dict[str, Any]:
    return _run_input(_user(CALL_PICK), {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "teal"})


def _ai_sdk_answer(message_id: str, call_id: str) -> dict[str, Any]:
    output = {"type": "tool-pick_color", "toolCallId": call_id, "state": "output-available", "input": {}}
    assistant = {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"}, {**output, "output": "teal"}]}
    return _chat(_ui_user(CALL_PICK), assistant, tools=[PICK])


@contextlib.asynccontextmanager
async def _held_stream(client: httpx.AsyncClient, session: Session) -> AsyncIterator[None]:
    async with _opened(client, "GET", f"/v1/sessions/{session.id}/events/stream"):
        yield


def _owed(events: list[dict[str, Any]], call_id: str) -> bool:
    """The call was handed to the frontend, and nothing settled it."""
    settled = ("tool_result", "client_tool_failed")
    return any(e["type"] == "client_tool_acked" and e["call_id"] == call_id for e in events) and not any(
        e["type"] in settled and e.get("call_id") == call_id for e in events
    )


@pytest.fixture(params=["max_streams_per_session", "max_streams_per_credential"])
async def capped(
    request: pytest.FixtureRequest, settings: Settings, redis_url: str, api_key: str
) -> AsyncIterator[Api]:
    """A stack where the session (or its token) may hold one event stream at a time."""
    async with running_api(settings, redis_url, api_key, {request.param: 1}) as api:
        yield api


async def test_an_ag_ui_answer_refused_at_the_stream_cap_records_nothing(capped: Api) -> None:
    session = await capped.session()
    async with capped.as_session(session) as tab:
        call_id = await _ag_ui_call(tab, session)
        async with _held_stream(tab, session):
            refused = await tab.post(_ag_ui(session), json=_ag_ui_answer(call_id))
            assert refused.status_code == 429, refused.text
            assert "SWITCHBOARD_MAX_STREAMS_PER_" in refused.text
            events = await capped.events(session)
            assert _owed(events, call_id), [e["type"] for e in events]
            assert not of_type(events, "tool_result")
        # The stream closed: the same answer is taken, once.
        await _stream(tab, _ag_ui(session), _ag_ui_answer(call_id))
    assert [e["call_id"] for e in of_type(await capped.events(session), "tool_result")] == [call_id]


async def test_an_ai_sdk_answer_refused_at_the_stream_cap_records_nothing(capped: Api) -> None:
    session = await capped.session()
    async with capped.as_session(session) as tab:
        message_id, call_id = await _ai_sdk_call(tab, session)
        async with _held_stream(tab, session):
            refused = await tab.post(_ai_sdk(session), json=_ai_sdk_answer(message_id, call_id))
            assert refused.status_code == 429, refused.text
            events = await capped.events(session)
            assert _owed(events, call_id), [e["type"] for e in events]
            assert not of_type(events, "tool_result")
        await _stream(tab, _ai_sdk(session), _ai_sdk_answer(message_id, call_id))
    assert [e["call_id"] for e in of_type(await capped.events(session), "tool_result")] == [call_id]


def _tool_message(number: int, call_id: str = "") -> dict[str, Any]:
    return {"id": f"t{number}", "role": "tool", "toolCallId": call_id or f"c{number}", "content": "k"}


def _ui_output(number: int, call_id: str = "") -> dict[str, Any]:
    part = {"type": "tool-pick_color", "toolCallId": call_id or f"c{number}", "state": "output-available"}
    return {**part, "input": {}, "output": "k"}


def _past_the_bounds(call_id: str, message_id: str) -> list[tuple[str, dict[str, Any], str]]:
    """(door, body, what the 400 names): each body one past a bound, each carrying the owed call's
    answer where the door would read it, and new input where it can."""
    answer = _tool_message(0, call_id)
    ui_answer = _ui_output(0, call_id)
    step = {"type": "step-start"}

    def assistant_with(parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": message_id, "role": "assistant", "parts": parts}

    many_messages = [_user(f"m{n}", f"m{n}") for n in range(MAX_MESSAGES)]
    many_parts = {"id": "u", "role": "user", "content": [{"type": "text", "text": "x"}] * (MAX_PARTS + 1)}
    return [
        ("ag-ui", _run_input(answer, *many_messages), f"messages: more than {MAX_MESSAGES:,} items"),
        ("ag-ui", _run_input(*[_user(f"m{n}", f"m{n}") for n in range(MAX_TAIL)], answer), "messages: more than"),
        (
            "ag-ui",
            _run_input(answer, *[_tool_message(n) for n in range(1, MAX_ANSWERS + 1)]),
            f"the limit is {MAX_ANSWERS}",
        ),
        (
            "ag-ui",
            _run_input(answer, _user("hi"), context=[{"description": "d", "value": "v"}] * (MAX_CONTEXT + 1)),
            f"context: more than {MAX_CONTEXT} items",
        ),
        (
            "ag-ui",
            _run_input(answer, many_parts),
            f"messages.1.content: more than {MAX_PARTS:,} items",
        ),
        (
            "ai-sdk",
            _chat(*[_ui_user("m") for _ in range(MAX_MESSAGES)], assistant_with([step, ui_answer])),
            f"messages: more than {MAX_MESSAGES:,} items",
        ),
        (
            "ai-sdk",
            _chat(_ui_user(CALL_PICK), assistant_with([step, ui_answer, *[step] * MAX_PARTS])),
            f"messages.1.parts: more than {MAX_PARTS:,} items",
        ),
        (
            "ai-sdk",
            _chat(_ui_user(CALL_PICK), assistant_with([step, ui_answer, *[_ui_output(n) for n in range(MAX_ANSWERS)]])),
            f"the limit is {MAX_ANSWERS}",
        ),
    ]


async def test_bodies_past_the_doors_bounds_are_400_naming_the_limit_and_write_nothing(api: Api) -> None:
    session = await api.session()
    async with api.as_session(session) as tab:
        call_id = await _ag_ui_call(tab, session)
        before = await api.events(session)
        for door, body, named in _past_the_bounds(call_id, "m"):
            path = _ag_ui(session) if door == "ag-ui" else _ai_sdk(session)
            content = json.dumps(body).encode()
            assert len(content) < 1_048_576, (door, named, len(content))
            refused = await tab.post(path, content=content, headers={"Content-Type": "application/json"})
            assert refused.status_code == 400, (door, named, refused.text)
            assert named in refused.json()["error"]["message"], (door, refused.text)
            assert await api.events(session) == before, (door, named)
    assert _owed(before, call_id)


async def test_an_answer_with_input_the_concurrency_policy_refuses_records_nothing(api: Api) -> None:
    session = await api.session(message_concurrency="drop")
    async with api.as_session(session) as tab:
        call_id = await _ag_ui_call(tab, session)
        # The frontend answers its tool and the user writes again: during the run, which drops input.
        body = _run_input(_user(CALL_PICK), _tool_message(1, call_id), _user("and another thing", "u2"))
        refused = await tab.post(_ag_ui(session), json=body)
    assert refused.status_code == 409, refused.text
    assert "drops input" in refused.json()["error"]["message"]
    events = await api.events(session)
    assert _owed(events, call_id), [e["type"] for e in events]
    assert len(of_type(events, "message_user")) == 1


async def test_an_answer_with_input_past_the_sessions_room_together_records_nothing(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    # Either fits the session's room alone (the input is kept twice until its run starts, 230 KB), not
    # both: the request's writes are held against the room together, before any is made.
    cap = 300_000
    async with running_api(settings, redis_url, api_key, {"max_session_bytes": cap}) as api:
        session = await api.session()
        async with api.as_session(session) as tab:
            call_id = await _ag_ui_call(tab, session)
            result = {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "r" * 65_000}
            body = _run_input(_user(CALL_PICK), result, _user("i" * 115_000, "u2"))
            refused = await tab.post(_ag_ui(session), json=body)
        assert refused.status_code == 409, refused.text
        assert "SWITCHBOARD_MAX_SESSION_BYTES" in refused.json()["error"]["message"]
        events = await api.events(session)
        assert _owed(events, call_id), [e["type"] for e in events]
        assert len(of_type(events, "message_user")) == 1


async def test_an_answer_with_a_decision_its_tools_schema_refuses_records_nothing(api: Api) -> None:
    note = {"name": "note", "description": "Note a thing.", "parameters": {"type": "object"}}
    session = await api.session(client_tool_policies={"pick_color": "require_approval"})
    text = '/call note {"text": "x"}\n/call pick_color {"color": "red"}'
    async with api.as_session(session) as tab:
        events = await _stream(tab, _ag_ui(session), _run_input(_user(text), tools=[PICK, note]))
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        (noted,) = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "note"]
        # The frontend answers its tool and allows the gated call with arguments its schema refuses.
        edited = {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"decision": "allow", "arguments": {"color": 5}},
        }
        body = _run_input(_user(text), _tool_message(1, noted), resume=[edited], tools=[PICK, note])
        refused = await tab.post(_ag_ui(session), json=body)
    assert refused.status_code == 400, refused.text
    assert "schema of pick_color" in refused.json()["error"]["message"]
    events = await api.events(session)
    assert _owed(events, noted), [e["type"] for e in events]
    assert not of_type(events, "approval_resolved")


def _room_taken_meanwhile(monkeypatch: pytest.MonkeyPatch, api: Api, session: Session) -> None:
    """The next check of the session's room passes, and then, before the door writes, another request
    takes that room (the check reserves nothing): registrations of 12 KB of tools until the session
    refuses one, which leaves less room than the door's request needs."""
    checked = Clients.room

    async def room(self: Clients, *args: Any, **kwargs: Any) -> Conflict | None:
        full = await checked(self, *args, **kwargs)
        monkeypatch.setattr(Clients, "room", checked)
        tools = [{"name": f"filler{n}", "description": "d" * 4_000, "parameters": {"type": "object"}} for n in range(3)]
        async with api.as_session(session) as other:
            for number in range(MAX_ACTIVE_CLIENTS):
                body = {"name": f"filler{number}", "lifetime": {"type": "never"}, "tools": tools}
                taken = await other.post(f"/v1/sessions/{session.id}/clients", json=body)
                if taken.status_code == 409:
                    return full
                assert taken.status_code == 201, taken.text
        raise AssertionError("the session still had room")

    monkeypatch.setattr(Clients, "room", room)


async def _refusal(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[int, str]:
    """The door's status and, for a refusal, its error message; a stream is closed at once, unread (one
    that answers a lost result would wait for the call's deadline)."""
    async with client.stream("POST", path, json=body) as answer:
        if answer.status_code == 200:
            return 200, ""
        await answer.aread()
        return answer.status_code, str(answer.json()["error"]["message"])


async def test_an_answer_whose_room_another_request_took_is_409_and_the_call_stays_owed(
    settings: Settings, redis_url: str, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_api(settings, redis_url, api_key, {"max_session_bytes": 300_000}) as api:
        session = await api.session()
        async with api.as_session(session) as tab:
            call_id = await _ag_ui_call(tab, session)
            _room_taken_meanwhile(monkeypatch, api, session)
            result = {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "r" * 60_000}
            status, message = await _refusal(tab, _ag_ui(session), _run_input(_user(CALL_PICK), result))
            assert status == 409, message
            assert call_id in message, message
            assert "SWITCHBOARD_MAX_SESSION_BYTES" in message, message
            events = await api.events(session)
            assert _owed(events, call_id), [e["type"] for e in events]


async def test_a_decision_whose_room_another_request_took_is_409_and_the_call_stays_undecided(
    settings: Settings, redis_url: str, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_api(settings, redis_url, api_key, {"max_session_bytes": 300_000}) as api:
        session = await api.session(client_tool_policies={"pick_color": "require_approval"})
        async with api.as_session(session) as tab:
            events = await _stream(tab, _ag_ui(session), _run_input(_user(CALL_PICK), tools=[PICK]))
            (interrupt,) = events[-1]["outcome"]["interrupts"]
            _room_taken_meanwhile(monkeypatch, api, session)
            denied = {"decision": "deny", "message": "m" * 30_000}
            answer = {"interruptId": interrupt["id"], "status": "resolved", "payload": denied}
            body = _run_input(_user(CALL_PICK), resume=[answer], tools=[PICK])
            status, message = await _refusal(tab, _ag_ui(session), body)
            assert status == 409, message
            assert interrupt["id"] in message, message
            assert "SWITCHBOARD_MAX_SESSION_BYTES" in message, message
            assert not of_type(await api.events(session), "approval_resolved")
