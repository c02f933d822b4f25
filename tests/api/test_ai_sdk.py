"""The AI SDK door (docs/ai-sdk.md) driven by the real `ai` package's DefaultChatTransport and
readUIMessageStream in Node: text, a frontend tool answered, a server tool, an approval answered, an input
request shown as a data part, a resend that repeats no call, a frontend that never answers, a reload that
resumes the stream; and what the door refuses."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.api_client import Api, Session, of_type, run_over
from tests.fakes import Reply, anthropic_stream, fake_provider
from tests.js_clients import drive

# The fake providers listen on 127.0.0.1, a loopback address: allowed here only.
pytestmark = pytest.mark.private_providers

PICK = {
    "name": "pick_color",
    "description": "Ask the user to pick a color.",
    "parameters": {"type": "object", "properties": {"color": {"type": "string"}}},
}
CALC: dict[str, Any] = {"server_tools": ["calculate"]}

JSON = {"Content-Type": "application/json"}


async def _drive(
    api: Api, session: Session, *runs: dict[str, Any], tools: list[Any] | None = None
) -> list[dict[str, Any]]:
    plan = {
        "api": f"{api.stack.url}/v1/sessions/{session.id}/ai-sdk/chat",
        "token": session.token,
        "chatId": "chat-1",
        "tools": tools or [],
        "runs": list(runs),
        "inputsUrl": f"{api.stack.url}/v1/sessions/{session.id}/input-requests",
    }
    return await drive("ai_sdk_driver.mjs", plan)


def _types(run: dict[str, Any]) -> list[str]:
    return [chunk["type"] for chunk in run["chunks"]]


def _text(run: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in run["message"]["parts"] if p["type"] == "text").strip()


def _tools(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in run["message"]["parts"] if p["type"].startswith("tool-") or p["type"] == "dynamic-tool"]


async def test_text_streams_between_start_and_finish(api: Api) -> None:
    session = await api.session()
    (run,) = await _drive(api, session, {"send": "hello"})
    assert run["error"] is None, run
    types = _types(run)
    assert types[0] == "start"
    assert types[-1] == "finish"
    assert {"start-step", "text-start", "text-delta", "text-end", "finish-step"} <= set(types)
    assert run["chunks"][-1]["finishReason"] == "stop"
    assert _text(run) == "You said: hello"


async def test_the_stream_carries_the_protocol_header_and_a_failed_run_is_an_error_chunk(api: Api) -> None:
    session = await api.session()
    body = {"id": "c", "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "/fail down"}]}]}
    async with api.as_session(session) as client:
        answer = await client.post(f"/v1/sessions/{session.id}/ai-sdk/chat", json=body)
    assert answer.status_code == 200
    assert answer.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert answer.headers["content-type"].startswith("text/event-stream")
    lines = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    assert json.loads(lines[-2]) == {"type": "error", "errorText": "down"}


async def test_a_frontend_tool_ends_the_stream_and_its_output_continues_the_same_run(api: Api) -> None:
    session = await api.session()
    first, second = await _drive(
        api, session, {"send": '/call pick_color {"color": "red"}'}, {"answerPending": "red it is"}, tools=[PICK]
    )
    assert first["error"] is None, first
    assert first["chunks"][-1] == {"type": "finish", "finishReason": "tool-calls"}
    (part,) = _tools(first)
    assert (part["type"], part["state"], part["input"]) == ("tool-pick_color", "input-available", {"color": "red"})
    assert "providerExecuted" not in part
    deltas = "".join(c["inputTextDelta"] for c in first["chunks"] if c["type"] == "tool-input-delta")
    assert json.loads(deltas) == {"color": "red"}
    assert second["error"] is None, second
    assert second["message"]["id"] == first["message"]["id"]
    assert "pick_color: red it is" in _text(second)
    events = await api.events(session)
    assert len(of_type(events, "run_started")) == 1
    assert len(of_type(events, "tool_result")) == 1


async def test_a_server_tool_streams_as_provider_executed_with_its_output(api: Api) -> None:
    session = await api.session(**CALC)
    (run,) = await _drive(api, session, {"send": '/call calculate {"expression": "2+3"}'})
    assert run["error"] is None, run
    (part,) = _tools(run)
    assert (part["type"], part["toolName"], part["state"], part["output"]) == (
        "dynamic-tool",
        "calculate",
        "output-available",
        "5",
    )
    assert part["providerExecuted"] is True
    assert "calculate: 5" in _text(run)


async def test_an_approval_request_is_answered_by_the_resubmitted_message(api: Api) -> None:
    session = await api.session(**CALC, server_tool_policies={"calculate": "require_approval"})
    first, second = await _drive(
        api, session, {"send": '/call calculate {"expression": "6*7"}'}, {"approvePending": True}
    )
    assert first["error"] is None, first
    assert "tool-approval-request" in _types(first)
    (part,) = _tools(first)
    assert part["state"] == "approval-requested"
    assert second["error"] is None, second
    assert "calculate: 42" in _text(second)
    assert len(of_type(await api.events(session), "approval_resolved")) == 1


async def test_a_denied_approval_reaches_the_model_as_an_error_result(api: Api) -> None:
    session = await api.session(**CALC, server_tool_policies={"calculate": "require_approval"})
    _, second = await _drive(api, session, {"send": '/call calculate {"expression": "1"}'}, {"approvePending": False})
    assert second["error"] is None, second
    (denied,) = [c for c in second["chunks"] if c["type"] == "tool-output-error"]
    assert denied["providerExecuted"] is True
    assert "calculate failed" in _text(second)


async def test_resending_the_same_messages_makes_no_call_twice(api: Api) -> None:
    session = await api.session()
    runs = await _drive(
        api,
        session,
        {"send": "/call pick_color {}", "id": "u-once"},
        {"resend": True},
        {"answerPending": "done"},
        {"resend": True},
        tools=[PICK],
    )
    assert all(run["error"] is None for run in runs), runs
    # Resent before answering: the same turn again at once, nothing new in the message.
    assert _types(runs[1]) == ["start", "finish"]
    assert runs[1]["message"]["parts"] == runs[0]["message"]["parts"]
    assert "pick_color: done" in _text(runs[2])
    # Resent after the run ended: nothing is shown twice.
    assert _types(runs[3]) == ["start", "finish"]
    assert _text(runs[3]) == _text(runs[2])
    events = await api.events(session)
    assert len(of_type(events, "message_user")) == 1
    assert len(of_type(events, "client_tool_dispatched")) == 1
    assert len(of_type(events, "tool_result")) == 1
    assert len(of_type(events, "run_completed")) == 1


async def test_a_reload_mid_answer_resumes_the_whole_stream_from_the_log(api: Api) -> None:
    session = await api.session()
    cut, resumed, after = await _drive(
        api, session, {"send": "/sleep 1\nhello", "abortAfter": "start"}, {"resume": True}, {"resume": True}
    )
    assert cut["error"] is None, cut
    assert resumed["none"] is False, resumed
    assert _text(resumed) == "You said: /sleep 1\nhello"
    assert _types(resumed)[-1] == "finish"
    # Once the run is over there is nothing to resume: 204, and the transport says there is no stream.
    assert after["none"] is True


@pytest.mark.short_deadlines
async def test_a_frontend_that_never_answers_gets_the_usual_failure_and_the_run_ends(api: Api) -> None:
    session = await api.session()
    (run,) = await _drive(api, session, {"send": "/call pick_color {}"}, tools=[PICK])
    (part,) = _tools(run)
    events = await api.wait_for(session, run_over, timeout=10)
    (failed,) = of_type(events, "client_tool_failed")
    assert (failed["call_id"], failed["reason"]) == (part["toolCallId"], "result_timeout")
    assert of_type(events, "run_completed")


ASK_CALL = '/call client__web__highlight_row {"row_id": "7"}'
FORM = {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}}, "required": ["amount"]}


async def _asking_client(api: Api, session: Session, client_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """The session's client of `client__web__...`: acks the run's call, asks the person, then answers
    the call with what came back (once an answer came, or at once with `answered: false`)."""
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")), timeout=20)
    call_id = str(of_type(events, "client_tool_dispatched")[0]["call_id"])
    assert (await api.call(session, client_id, call_id, "ack")).status_code == 200
    async with api.as_session(session) as client:
        asked = await client.post(
            f"/v1/sessions/{session.id}/clients/{client_id}/calls/{call_id}/input-requests", json=body
        )
        assert asked.status_code == 201, asked.text
        request_id = asked.json()["request_id"]
        read: dict[str, Any] = {"state": "open"}
        for _ in range(200 if body.get("schema") else 0):
            read = (await client.get(f"/v1/sessions/{session.id}/input-requests/{request_id}")).json()
            if read["state"] != "open":
                break
            await asyncio.sleep(0.05)
    text = f"moved {(read.get('content') or {}).get('amount')}" if read["state"] == "answered" else "went on"
    assert (await api.call(session, client_id, call_id, "result", text=text)).status_code == 204
    return {"call_id": call_id, "request_id": request_id}


async def test_an_input_request_is_a_data_part_answered_at_its_route_while_the_stream_goes_on(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    answer = {"action": "accept", "content": {"amount": 3}}
    body = {"message": "Move how much?", "schema": FORM}
    (run,), asked = await asyncio.gather(
        _drive(api, session, {"send": ASK_CALL, "answerInputs": answer}), _asking_client(api, session, web["id"], body)
    )
    assert run["error"] is None, run
    assert run["answered"] == [200]
    parts = [c for c in run["chunks"] if c["type"] == "data-input-request"]
    common = {"request_id": asked["request_id"], "call_id": asked["call_id"], "tool": "client__web__highlight_row"}
    opened = {**common, "message": "Move how much?", "schema": FORM}
    assert [p["data"] for p in parts] == [
        {**opened, "state": "open"},
        {**opened, "state": "answered", "action": "accept", "content": {"amount": 3}},
    ]
    assert {p["id"] for p in parts} == {asked["request_id"]}
    # One part in the message, its data the newest: the SDK reconciles a data part by its id.
    (part,) = [p for p in run["message"]["parts"] if p["type"] == "data-input-request"]
    assert part["data"]["state"] == "answered"
    (tool,) = _tools(run)
    assert (tool["state"], tool["output"]) == ("output-available", "moved 3")
    assert run["chunks"][-1] == {"type": "finish", "finishReason": "stop"}


async def test_a_page_request_that_ends_with_its_call_shows_it_ended(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    body = {"message": "Sign the form", "url": "https://x.example/sign"}
    (run,), asked = await asyncio.gather(
        _drive(api, session, {"send": ASK_CALL}), _asking_client(api, session, web["id"], body)
    )
    assert run["error"] is None, run
    parts = [c["data"] for c in run["chunks"] if c["type"] == "data-input-request"]
    opened = {
        "request_id": asked["request_id"],
        "call_id": asked["call_id"],
        "tool": "client__web__highlight_row",
        "message": "Sign the form",
        "url": "https://x.example/sign",
    }
    assert parts == [
        {**opened, "state": "open"},
        {**opened, "state": "cancelled", "action": "cancel", "content": None, "reason": "call_settled"},
    ]
    assert _tools(run)[0]["output"] == "went on"


async def test_thinking_and_streamed_tool_input_of_a_real_adapter_reach_use_chat(api: Api) -> None:
    async with fake_provider() as fake:
        body = {"api_key": "k", "base_url": fake.url, "display_name": "fake", "format": "anthropic"}
        provider = (await api.key.post("/v1/model-providers", json=body)).json()
        agent = (await api.key.post("/v1/agents", json={"name": "thinks"})).json()
        model = {"format": "anthropic", "model": "claude-test", "max_tokens": 100}
        version = {"model_provider_id": provider["id"], "model": model, "server_tools": ["calculate"]}
        assert (await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
        session = await api.session(agent["id"])
        thinking = {"type": "thinking", "thinking": "two and two", "signature": "s"}
        use = {"type": "tool_use", "id": "toolu_1", "name": "calculate", "input": {"expression": "2+2"}}
        fake.replies = [
            Reply(frames=anthropic_stream(thinking, use, stop="tool_use")),
            Reply(frames=anthropic_stream({"type": "text", "text": "It is 4."})),
        ]
        (run,) = await _drive(api, session, {"send": "what is 2+2?"})
    assert run["error"] is None, run
    kinds = [part["type"] for part in run["message"]["parts"]]
    assert "reasoning" in kinds
    (reasoning,) = [p for p in run["message"]["parts"] if p["type"] == "reasoning"]
    assert reasoning["text"] == "two and two"
    (tool,) = _tools(run)
    assert (tool["toolName"], tool["input"], tool["output"]) == ("calculate", {"expression": "2+2"}, "4")
    assert [c["inputTextDelta"] for c in run["chunks"] if c["type"] == "tool-input-delta"] != []
    assert _text(run) == "It is 4."


def _chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "c", "messages": list(messages), "trigger": "submit-message", **extra}


def _user(text: str) -> dict[str, Any]:
    return {"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"[1, 2", "body"),
        ({"messages": []}, "id"),
        (_chat(_user("hi"), tools=[{"name": "bad name!", "description": "x"}]), "tools: 0.name"),
        (_chat(_user("hi"), tools=[{"name": "t", "parameters": {"type": 5}}]), "tools: 0.parameters"),
        (_chat(_user("hi"), tools=[{"name": f"t{i}"} for i in range(65)]), "tools"),
        (_chat(_user("x" * 300_000)), "messages.0.parts"),
        (
            _chat(
                {
                    "id": "u",
                    "role": "user",
                    "parts": [{"type": "file", "url": "http://x/a.png", "mediaType": "image/png"}],
                }
            ),
            "messages.0.parts.0",
        ),
        (
            _chat(
                _user("hi"),
                {
                    "id": "a",
                    "role": "assistant",
                    "parts": [
                        {"type": "tool-t", "toolCallId": "c1", "state": "output-available", "output": "x" * 70_000}
                    ],
                },
            ),
            "messages.1.parts.0.output",
        ),
    ],
)
async def test_bad_input_is_400_naming_the_field_and_writes_nothing(api: Api, body: Any, field: str) -> None:
    session = await api.session()
    before = await api.events(session)
    async with api.as_session(session) as client:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        answer = await client.post(f"/v1/sessions/{session.id}/ai-sdk/chat", content=content, headers=JSON)
    assert answer.status_code == 400, answer.text
    assert field in answer.json()["error"]["message"], answer.json()
    assert await api.events(session) == before


async def test_another_sessions_token_or_no_credential_reaches_nothing(api: Api) -> None:
    session, other = await api.session(), await api.session()
    path = f"/v1/sessions/{session.id}/ai-sdk/chat"
    async with api.as_session(other) as client:
        assert (await client.post(path, json=_chat(_user("hi")))).status_code == 404
        assert (await client.get(f"{path}/c/stream")).status_code == 404
    async with httpx.AsyncClient(base_url=api.stack.url) as anonymous:
        assert (await anonymous.post(path, json=_chat(_user("hi")))).status_code == 401
    assert not of_type(await api.events(session), "message_user")
