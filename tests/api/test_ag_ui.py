"""The AG-UI door (docs/ag-ui.md) driven by the real `@ag-ui/client` HttpAgent in Node: text, a frontend
tool answered, a server tool, an approval resumed, an input request resumed, a reload that repeats no call, a
frontend that never answers; and what the door refuses."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.api_client import Api, Session, of_type, run_over
from tests.fakes import Reply, anthropic_stream, fake_provider
from tests.js_clients import drive

PICK = {
    "name": "pick_color",
    "description": "Ask the user to pick a color.",
    "parameters": {"type": "object", "properties": {"color": {"type": "string"}}},
}
CALC: dict[str, Any] = {"server_tools": ["calculate"]}

JSON = {"Content-Type": "application/json"}


def _door(api: Api, session: Session) -> str:
    return f"{api.stack.url}/v1/sessions/{session.id}/ag-ui"


async def _drive(api: Api, session: Session, *runs: dict[str, Any], proto: bool = False) -> list[dict[str, Any]]:
    plan = {"url": _door(api, session), "token": session.token, "threadId": "thread-1", "runs": list(runs)}
    return await drive("ag_ui_driver.mjs", {**plan, "proto": proto})


def _user(text: str, message_id: str = "u1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def _types(run: dict[str, Any]) -> list[str]:
    return [event["type"] for event in run["events"]]


def _assistant_text(run: dict[str, Any]) -> str:
    return "".join(m.get("content") or "" for m in run["messages"] if m["role"] == "assistant").strip()


def _calls(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tool calls the run streamed: name and the arguments its TOOL_CALL_ARGS joined to."""
    calls: dict[str, dict[str, Any]] = {}
    for event in run["events"]:
        if event["type"] == "TOOL_CALL_START":
            calls[event["toolCallId"]] = {"name": event["toolCallName"], "args": ""}
        elif event["type"] == "TOOL_CALL_ARGS":
            calls[event["toolCallId"]]["args"] += event["delta"]
    return calls


async def test_text_streams_as_one_assistant_message_between_run_started_and_finished(api: Api) -> None:
    session = await api.session()
    (run,) = await _drive(api, session, {"add": [_user("hello")]})
    assert run["error"] is None, run
    types = _types(run)
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    assert {"STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED"} <= set(
        types
    )
    assert run["finished"]["type"] == "success"
    assert _assistant_text(run) == "You said: hello"


async def test_context_reaches_the_model_before_the_users_text(api: Api) -> None:
    session = await api.session()
    context = [{"description": "the page the user is on", "value": "/orders/42"}]
    (run,) = await _drive(api, session, {"add": [_user("where am I?")], "context": context})
    assert run["error"] is None, run
    assert (
        _assistant_text(run) == "You said: Context from the app:\n- the page the user is on: /orders/42\n\nwhere am I?"
    )


async def test_a_failed_run_is_a_run_error_saying_why(api: Api) -> None:
    session = await api.session()
    (run,) = await _drive(api, session, {"add": [_user("/fail the model is down")]})
    assert _types(run)[-1] == "RUN_ERROR"
    error = run["events"][-1]
    assert (error["code"], error["message"]) == ("run_failed", "the model is down")


async def test_a_frontend_tool_ends_the_ag_ui_run_and_its_answer_continues_the_same_run(api: Api) -> None:
    session = await api.session()
    first, second = await _drive(
        api,
        session,
        {"add": [_user('/call pick_color {"color": "red"}')], "tools": [PICK]},
        {"answerPending": "the user picked red", "tools": [PICK]},
    )
    assert first["error"] is None, first
    (call_id,) = first["finished"]["pendingToolCallIds"]
    assert _calls(first) == {call_id: {"name": "pick_color", "args": '{"color": "red"}'}}
    assert "TOOL_CALL_END" in _types(first)
    assert "TOOL_CALL_RESULT" not in _types(first)
    assert second["error"] is None, second
    assert second["finished"] == {"type": "success"}
    assert "pick_color: the user picked red" in _assistant_text(second)
    events = await api.events(session)
    assert len(of_type(events, "run_started")) == 1
    assert [e["call_id"] for e in of_type(events, "tool_result")] == [call_id]


async def test_a_server_tool_shows_its_result_in_the_same_ag_ui_run(api: Api) -> None:
    session = await api.session(**CALC)
    (run,) = await _drive(api, session, {"add": [_user('/call calculate {"expression": "2+3"}')]})
    assert run["error"] is None, run
    (result,) = [e for e in run["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "5"
    assert _calls(run)[result["toolCallId"]]["name"] == "calculate"
    assert "calculate: 5" in _assistant_text(run)


async def test_an_approval_is_an_interrupt_and_resume_decides_it(api: Api) -> None:
    session = await api.session(**CALC, server_tool_policies={"calculate": "require_approval"})
    first, second = await _drive(
        api,
        session,
        {"add": [_user('/call calculate {"expression": "6*7"}')]},
        {"resumePending": {"decision": "allow"}},
    )
    assert first["error"] is None, first
    (interrupt,) = first["finished"]["interrupts"]
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["toolCallId"] == interrupt["id"]
    assert interrupt["responseSchema"]
    assert second["error"] is None, second
    assert [e["content"] for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["42"]
    assert "calculate: 42" in _assistant_text(second)
    assert len(of_type(await api.events(session), "approval_resolved")) == 1


async def test_a_reloaded_frontend_resending_its_message_makes_no_call_twice(api: Api) -> None:
    session = await api.session()
    message = _user('/call pick_color {"color": "blue"}', "u-reload")
    runs = await _drive(
        api,
        session,
        {"add": [message], "tools": [PICK]},
        # The page reloads and sends the same conversation again: the same run, the same call.
        {"fresh": True, "add": [message], "tools": [PICK]},
        {"answerPending": "blue it is", "tools": [PICK]},
        # The page reloads again once it was answered, then sends what it has again.
        {"fresh": True, "add": [message], "tools": [PICK]},
        {"tools": [PICK]},
    )
    assert all(run["error"] is None for run in runs), runs
    first, again = runs[0]["finished"]["pendingToolCallIds"], runs[1]["finished"]["pendingToolCallIds"]
    assert first == again
    assert "pick_color: blue it is" in _assistant_text(runs[2])
    # Reloaded after the answer: the run again, whole, with the call's result and no turn to take again.
    assert runs[3]["finished"] == {"type": "success"}
    assert [e["toolCallId"] for e in runs[3]["events"] if e["type"] == "TOOL_CALL_RESULT"] == first
    assert "pick_color: blue it is" in _assistant_text(runs[3])
    # Nothing new since: the stream says so and shows nothing twice.
    assert runs[4]["finished"] == {"type": "success"}
    assert _types(runs[4]) == ["RUN_STARTED", "RUN_FINISHED"]
    events = await api.events(session)
    assert len(of_type(events, "message_user")) == 1
    assert len(of_type(events, "client_tool_dispatched")) == 1
    assert len(of_type(events, "tool_result")) == 1
    assert len(of_type(events, "run_completed")) == 1


async def test_a_client_that_asks_for_the_binary_encoding_gets_it_event_for_event(api: Api) -> None:
    session = await api.session(**CALC, server_tool_policies={"calculate": "require_approval"})
    text = '/call pick_color {"color": "red"}'
    runs: list[dict[str, Any]] = [
        {"add": [_user(text)], "tools": [PICK]},
        {"answerPending": "red", "tools": [PICK]},
        {"add": [_user('/call calculate {"expression": "6*7"}', "u2")]},
        {"resumePending": {"decision": "allow"}},
        {"fresh": True},
    ]
    binary = await _drive(api, session, *runs, proto=True)
    assert all(run["error"] is None for run in binary), binary
    assert {run["contentType"] for run in binary} == {"application/vnd.ag-ui.event+proto"}
    first, answered, asked, resumed, snapshot = binary
    (call_id,) = first["finished"]["pendingToolCallIds"]
    assert _calls(first) == {call_id: {"name": "pick_color", "args": '{"color": "red"}'}}
    assert "pick_color: red" in _assistant_text(answered)
    (interrupt,) = asked["finished"]["interrupts"]
    assert (interrupt["reason"], interrupt["toolCallId"]) == ("tool_approval", interrupt["id"])
    assert interrupt["responseSchema"] == json.loads(json.dumps(interrupt["responseSchema"]))
    assert [e["content"] for e in resumed["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["42"]
    # Nothing to do: the conversation as a MESSAGES_SNAPSHOT, in the binary encoding too.
    (shot,) = [e for e in snapshot["events"] if e["type"] == "MESSAGES_SNAPSHOT"]
    assert [m["role"] for m in shot["messages"]][:2] == ["user", "assistant"]
    assert any(call["id"] == call_id for m in shot["messages"] for call in m.get("toolCalls") or [])


@pytest.mark.short_deadlines
async def test_a_frontend_that_never_answers_gets_the_usual_failure_and_the_run_ends(api: Api) -> None:
    session = await api.session()
    (run,) = await _drive(api, session, {"add": [_user("/call pick_color {}")], "tools": [PICK]})
    (call_id,) = run["finished"]["pendingToolCallIds"]
    events = await api.wait_for(session, run_over, timeout=10)
    (failed,) = of_type(events, "client_tool_failed")
    assert (failed["call_id"], failed["reason"]) == (call_id, "result_timeout")
    assert of_type(events, "run_completed")


ASK_CALL = '/call client__web__highlight_row {"row_id": "7"}'
URL = "https://x.example/pick"
FORM = {
    "type": "object",
    "properties": {"amount": {"type": "number", "minimum": 0}, "confirm": {"type": "boolean"}},
    "required": ["amount"],
}


async def _asked(api: Api, session: Session, client_id: str, body: dict[str, Any]) -> tuple[str, str]:
    """The call the run made of the client's tool, acked, and the request its client made on it."""
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")), timeout=20)
    call_id = str(of_type(events, "client_tool_dispatched")[0]["call_id"])
    assert (await api.call(session, client_id, call_id, "ack")).status_code == 200
    path = f"/v1/sessions/{session.id}/clients/{client_id}/calls/{call_id}/input-requests"
    async with api.as_session(session) as client:
        asked = await client.post(path, json=body)
    assert asked.status_code == 201, asked.text
    return call_id, str(asked.json()["request_id"])


async def _answered(api: Api, session: Session, request_id: str) -> dict[str, Any]:
    async with api.as_session(session) as client:
        for _ in range(200):
            read = (await client.get(f"/v1/sessions/{session.id}/input-requests/{request_id}")).json()
            if read["state"] != "open":
                return dict(read)
            await asyncio.sleep(0.05)
    raise AssertionError(f"input request {request_id} was never answered")


@pytest.mark.parametrize("proto", [False, True])
async def test_an_input_request_is_an_interrupt_and_resume_answers_it(api: Api, proto: bool) -> None:
    session = await api.session()
    web = await api.register(session)

    async def backend() -> dict[str, Any]:
        call_id, request_id = await _asked(api, session, web["id"], {"message": "Move how much?", "schema": FORM})
        answer = await _answered(api, session, request_id)
        amount = (answer["content"] or {}).get("amount")
        assert (await api.call(session, web["id"], call_id, "result", text=f"moved {amount}")).status_code == 204
        return {"call_id": call_id, "request_id": request_id, **answer}

    payload = {"action": "accept", "content": {"amount": 12.5, "confirm": True}}
    asked, resumed = await asyncio.gather(
        _drive(api, session, {"add": [_user(ASK_CALL)]}, {"resumePending": payload}, proto=proto), backend()
    )
    first, second = asked
    assert first["error"] is None, first
    (interrupt,) = first["finished"]["interrupts"]
    assert (interrupt["id"], interrupt["reason"]) == (resumed["request_id"], "input_request")
    assert (interrupt["toolCallId"], interrupt["message"]) == (resumed["call_id"], "Move how much?")
    assert interrupt["responseSchema"]["properties"]["content"] == FORM
    assert interrupt["responseSchema"]["properties"]["action"]["enum"] == ["accept", "decline", "cancel"]
    assert interrupt["metadata"] == {"call_id": resumed["call_id"], "tool": "client__web__highlight_row"}
    assert (resumed["state"], resumed["action"], resumed["content"]) == ("answered", "accept", payload["content"])
    assert second["error"] is None, second
    assert [e["content"] for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["moved 12.5"]
    assert second["finished"] == {"type": "success"}
    assert len(of_type(await api.events(session), "run_started")) == 1


@pytest.mark.private_providers
async def test_after_an_answered_input_request_the_frontends_own_call_is_its_turn_again(api: Api) -> None:
    async with fake_provider() as fake:
        body = {"api_key": "k", "base_url": fake.url, "display_name": "fake", "format": "anthropic"}
        provider = (await api.key.post("/v1/model-providers", json=body)).json()
        agent = (await api.key.post("/v1/agents", json={"name": "asks then picks"})).json()
        model = {"format": "anthropic", "model": "claude-test", "max_tokens": 100}
        version = {"model_provider_id": provider["id"], "model": model}
        assert (await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
        session = await api.session(agent["id"])
        web = await api.register(session)
        backend_call = {"id": "toolu_1", "name": "client__web__highlight_row", "input": {"row_id": "7"}}
        frontend_call = {"id": "toolu_2", "name": "pick_color", "input": {"color": "red"}}
        fake.replies = [
            Reply(frames=anthropic_stream({"type": "tool_use", **backend_call}, stop="tool_use")),
            Reply(frames=anthropic_stream({"type": "tool_use", **frontend_call}, stop="tool_use")),
            Reply(frames=anthropic_stream({"type": "text", "text": "all done"})),
        ]

        async def backend() -> None:
            call_id, request_id = await _asked(api, session, web["id"], {"message": "Which row?", "url": URL})
            await _answered(api, session, request_id)
            assert (await api.call(session, web["id"], call_id, "result", text="lit")).status_code == 204

        runs: list[dict[str, Any]] = [
            {"add": [_user("go")], "tools": [PICK]},
            {"resumePending": {"action": "accept"}, "tools": [PICK]},
            {"answerPending": "red it is", "tools": [PICK]},
        ]
        (asked, resumed, answered), _ = await asyncio.gather(_drive(api, session, *runs), backend())
    assert [i["reason"] for i in asked["finished"]["interrupts"]] == ["input_request"]
    # The resumed stream shows the call's result, then ends where the frontend's own tool is called.
    assert resumed["error"] is None, resumed
    assert [e["content"] for e in resumed["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["lit"]
    assert resumed["finished"]["pendingToolCallIds"] == ["toolu_2"]
    assert answered["error"] is None, answered
    assert answered["finished"] == {"type": "success"}
    assert "all done" in _assistant_text(answered)


async def test_a_url_request_cancelled_in_the_frontend_is_answered_cancel(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)

    async def backend() -> dict[str, Any]:
        call_id, request_id = await _asked(api, session, web["id"], {"message": "Sign", "url": "https://x.example/s"})
        answer = await _answered(api, session, request_id)
        assert (await api.call(session, web["id"], call_id, "result", text=answer["action"])).status_code == 204
        return answer

    runs: list[dict[str, Any]] = [{"add": [_user(ASK_CALL)]}, {"resumePending": None, "resumeStatus": "cancelled"}]
    (first, second), answer = await asyncio.gather(_drive(api, session, *runs), backend())
    (interrupt,) = first["finished"]["interrupts"]
    assert interrupt["metadata"]["url"] == "https://x.example/s"
    assert "content" not in interrupt["responseSchema"]["properties"]
    assert (answer["action"], answer["content"]) == ("cancel", None)
    assert [e["content"] for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["cancel"]


async def test_an_answer_the_form_refuses_is_400_naming_the_field_and_answers_nothing(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, ASK_CALL)
    _, request_id = await _asked(api, session, web["id"], {"message": "How much?", "schema": FORM})
    for payload, named in (
        ({"action": "accept", "content": {"amount": -1}}, f"resume: {request_id}: content.amount"),
        ({"action": "accept"}, f"resume: {request_id}: content.amount"),
        ({"action": "maybe"}, f"resume: {request_id}: action"),
        ({"action": "decline", "content": {"amount": 1}}, f"resume: {request_id}: content: only with action accept"),
    ):
        resume = [{"interruptId": request_id, "status": "resolved", "payload": payload}]
        answer = await _post(api, session, _input(resume=resume))
        assert answer.status_code == 400, answer.text
        assert named in answer.json()["error"]["message"], answer.json()
    async with api.as_session(session) as client:
        read = (await client.get(f"/v1/sessions/{session.id}/input-requests/{request_id}")).json()
    assert read["state"] == "open"


async def _post(api: Api, session: Session, body: Any, token: str | None = None) -> Any:
    async with api.stack.client(token or session.token) as client:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await client.post(f"/v1/sessions/{session.id}/ag-ui", content=content, headers=JSON)


def _input(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"threadId": "t", "runId": "r", "messages": list(messages), **extra}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        ({"runId": "r", "messages": []}, "threadId"),
        (_input(_user("hi"), tools=[{"name": "bad name!", "description": "x"}]), "tools: 0.name"),
        (_input(_user("hi"), tools=[{**PICK, "parameters": {"type": "no such type"}}]), "tools: 0.parameters"),
        (_input(_user("x" * 300_000)), "messages.0.content"),
        (_input(_user("")), "messages.0.content"),
        (
            _input(
                {
                    "id": "u",
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "url", "value": "http://x/y.png"}}],
                }
            ),
            "messages.0.content.0",
        ),
        (
            _input(_user("hi"), {"id": "t", "role": "tool", "toolCallId": "c", "content": "x" * 70_000}),
            "messages.1.content",
        ),
        (_input(_user("hi"), resume=[{"interruptId": f"c{i}", "status": "resolved"} for i in range(129)]), "resume"),
        (
            _input(_user("hi"), resume=[{"interruptId": "c", "status": "resolved", "payload": {"decision": "x"}}]),
            "resume",
        ),
    ],
)
async def test_bad_input_is_400_naming_the_field_and_writes_nothing(api: Api, body: Any, field: str) -> None:
    session = await api.session()
    before = await api.events(session)
    answer = await _post(api, session, body)
    assert answer.status_code == 400, answer.text
    assert field in answer.json()["error"]["message"], answer.json()
    assert await api.events(session) == before


async def test_a_token_of_another_session_or_no_credential_reaches_nothing(api: Api) -> None:
    session, other = await api.session(), await api.session()
    assert (await _post(api, session, _input(_user("hi")), token=other.token)).status_code == 404
    async with httpx.AsyncClient(base_url=api.stack.url) as anonymous:
        answer = await anonymous.post(f"/v1/sessions/{session.id}/ag-ui", json=_input(_user("hi")))
    assert answer.status_code == 401
    assert not of_type(await api.events(session), "message_user")
