"""The Chat Completions adapter (`openai_chat`), through the official `openai` package, against a local
server that streams as OpenAI's reference writes it and as the servers that differ from it do."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.api.test_providers import provider_session, text_of
from tests.api_client import Api, Event, Session, of_type, run_over, whole_log
from tests.fakes import FakeProvider, Reply
from tests.fakes_chat import ChatCall, Style, chat_stream, chat_usage
from workers.models.base import StreamLimits

# The fake providers listen on 127.0.0.1, a loopback address: allowed here only.
pytestmark = pytest.mark.private_providers

MODEL = {"format": "openai_chat", "model": "qwen-test", "max_tokens": 300, "context_window": 8000}
PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()


async def chat_session(
    api: Api, fake: FakeProvider, *, text_only: bool = False, model: dict[str, Any] | None = None, **config: Any
) -> Session:
    return await provider_session(api, fake, model or MODEL, text_only=text_only, **config)


async def logged(api: Api, session: Session, include: str) -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    return await whole_log(lambda params: api.key.get(path, params={**params, "include": include}))


def timings(events: list[Event], scope: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in events if e.get("kind") == "timing" and e["payload"]["scope"] == scope]


ROW = ChatCall("call_a", "client__web__highlight_row", {"row_id": "1"})
ROW2 = ChatCall("call_b", "client__web__highlight_row", {"row_id": "2"})


async def test_text_reasoning_settings_and_what_the_run_cost(api: Api, fake: FakeProvider) -> None:
    model = {**MODEL, "reasoning_effort": "low", "tool_choice": "required"}
    session = await chat_session(api, fake, model=model, system_prompt="Be brief.")
    await api.register(session)
    usage = chat_usage(120, 30, cached=100, reasoning=12)
    fake.replies = [chat_stream("Hello there friend", reasoning="Think first", usage=usage, model="qwen-3")]
    await api.send(session, "hi")
    events = await api.wait_for(session, run_over)
    (message,) = of_type(events, "message_assistant")
    assert message["message"]["content"][0] == {
        "type": "thinking",
        "data": {"thinking": "Think first", "redacted": False, "signature": None},
    }
    assert (text_of(message), message["message"]["model"]) == ("Hello there friend", "qwen-3")
    counts = {"input_tokens": 120, "output_tokens": 30, "cached_input_tokens": 100, "reasoning_tokens": 12}
    (completed,) = of_type(events, "run_completed")
    assert completed["usage"] == counts
    with_timing = await logged(api, session, "timing")
    assert timings(with_timing, "step")[0]["usage"] == counts
    assert timings(with_timing, "run")[0]["usage"] == counts
    (sent,) = fake.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer test-key"
    assert sent["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert (sent["model"], sent["max_tokens"], sent["stream"]) == ("qwen-test", 300, True)
    assert sent["stream_options"] == {"include_usage": True}
    assert (sent["reasoning_effort"], sent["tool_choice"], sent["parallel_tool_calls"]) == ("low", "required", True)
    assert sent["tools"][0]["type"] == "function"
    assert sent["tools"][0]["function"]["name"] == "client__web__highlight_row"


@pytest.mark.parametrize("style", ["openai", "index0", "whole", "no_ids", "repeated"])
async def test_parallel_calls_in_each_servers_streaming_style(api: Api, fake: FakeProvider, style: Style) -> None:
    session = await chat_session(api, fake)
    web = await api.register(session)
    # No usage chunk: a server that was not asked for counts (or ignores the asking) sends none.
    fake.replies = [chat_stream("", ROW, ROW2, style=style), chat_stream("Both lit.")]
    await api.send(session, "light one and two")
    events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 2)
    calls = of_type(events, "tool_call")
    assert [c["arguments"] for c in calls] == [{"row_id": "1"}, {"row_id": "2"}]
    ids = [c["call_id"] for c in calls]
    if style == "no_ids":
        assert len(set(ids)) == 2
        assert all(ids)
    else:
        assert ids == ["call_a", "call_b"]
    for call_id, text in zip(ids, ("lit 1", "lit 2"), strict=True):
        assert (await api.call(session, web["id"], call_id, "result", text=text)).status_code == 204
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[-1]) == "Both lit."
    assert "usage" not in of_type(events, "run_completed")[0]
    second = fake.requests[1]["messages"]
    assert second[1]["role"] == "assistant"
    assert second[1]["content"] is None
    assert [(c["id"], c["function"]["arguments"]) for c in second[1]["tool_calls"]] == [
        (ids[0], '{"row_id":"1"}'),
        (ids[1], '{"row_id":"2"}'),
    ]
    assert second[2:] == [
        {"role": "tool", "tool_call_id": ids[0], "content": "lit 1"},
        {"role": "tool", "tool_call_id": ids[1], "content": "lit 2"},
    ]


async def test_deltas_stream_reasoning_and_each_calls_arguments(api: Api, fake: FakeProvider) -> None:
    session = await chat_session(api, fake)
    await api.register(session)
    fake.replies = [chat_stream("", ROW, ROW2, reasoning="two rows", style="index0")]
    async with api.stream(session, include="deltas,thinking") as frames:
        await api.send(session, "go")
        seen: list[dict[str, Any]] = []
        dispatched = 0
        while dispatched < 2:
            event = await frames.event()
            if event["type"] in ("thinking_delta", "tool_call_delta"):
                seen.append(event)
            dispatched += event["type"] == "client_tool_dispatched"
    assert "".join(e["delta"] for e in seen if e["type"] == "thinking_delta") == "two rows"
    arguments: dict[int, str] = {}
    for event in seen:
        if event["type"] == "tool_call_delta":
            arguments[event["index"]] = arguments.get(event["index"], "") + event["delta"]
    assert arguments == {0: '{"row_id":"1"}', 1: '{"row_id":"2"}'}


@pytest.mark.parametrize("finish", ["stop", "function_call", "eos"])
async def test_calls_count_whatever_finish_reason_the_server_spells(api: Api, fake: FakeProvider, finish: str) -> None:
    session = await chat_session(api, fake)
    await api.register(session)
    fake.replies = [chat_stream("", ROW, finish=finish)]
    await api.send(session, "light")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert of_type(events, "tool_call")[0]["arguments"] == {"row_id": "1"}


async def test_a_call_with_no_arguments_at_all_gets_an_empty_object(api: Api, fake: FakeProvider) -> None:
    session = await chat_session(api, fake)
    await api.register(session)
    fake.replies = [chat_stream("", ChatCall("call_e", "client__web__highlight_row", ""), style="whole")]
    await api.send(session, "light")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert of_type(events, "tool_call")[0]["arguments"] == {}


async def test_filtered_output_ends_the_run_saying_so(api: Api, fake: FakeProvider) -> None:
    session = await chat_session(api, fake)
    fake.replies = [chat_stream("", finish="content_filter")]
    await api.send(session, "something")
    events = await api.wait_for(session, run_over)
    assert (
        "withheld by the provider's filter (finish_reason content_filter)" in of_type(events, "run_failed")[0]["error"]
    )


async def test_refused_parameters_are_dropped_and_remembered(api: Api, fake: FakeProvider) -> None:
    session = await chat_session(api, fake)
    await api.register(session)
    # As vLLM and llama.cpp word it, and as a FastAPI-based proxy that forbids extra fields answers.
    unknown = {"object": "error", "message": "Unrecognized request argument supplied: stream_options"}
    extra = {"type": "extra_forbidden", "loc": ["body", "parallel_tool_calls"], "msg": "Extra inputs are not permitted"}
    renamed = "Unsupported parameter: 'max_tokens' is not supported with this model; use 'max_completion_tokens'."
    fake.replies = [
        Reply(400, unknown),
        Reply(422, {"detail": [extra]}),
        Reply(400, {"error": {"message": renamed, "param": "max_tokens"}}),
        chat_stream("one"),
        chat_stream("two"),
    ]
    await api.send(session, "first")
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[0]) == "one"
    await api.send(session, "second")
    events = await api.wait_for(session, lambda es: len(of_type(es, "run_completed")) == 2)
    assert len(fake.requests) == 5
    first, second, third, fourth, fifth = fake.requests
    assert "stream_options" in first
    assert "stream_options" not in second
    assert "parallel_tool_calls" in second
    assert "parallel_tool_calls" not in third
    assert third["max_tokens"] == 300
    assert "max_tokens" not in fourth
    assert fourth["max_completion_tokens"] == 300
    assert not {"stream_options", "parallel_tool_calls", "max_tokens"} & set(fifth)


async def test_a_value_the_server_does_not_like_is_not_mistaken_for_an_unknown_parameter(
    api: Api, fake: FakeProvider
) -> None:
    session = await chat_session(api, fake)
    fake.replies = [Reply(400, {"error": {"message": "max_tokens is too large: 300000", "param": "max_tokens"}})]
    await api.send(session, "hi")
    events = await api.wait_for(session, run_over)
    assert "max_tokens is too large" in of_type(events, "run_failed")[0]["error"]
    assert len(fake.requests) == 1


async def test_images_follow_the_tool_messages_or_become_their_placeholder(api: Api, fake: FakeProvider) -> None:
    for text_only in (False, True):
        fake.requests.clear()
        session = await chat_session(api, fake, text_only=text_only)
        web = await api.register(session)
        fake.replies = [chat_stream("", ROW, ROW2), chat_stream("Seen.")]
        await api.send(session, "look")
        await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 2)
        image = {"type": "image", "media_type": "image/png", "data": PIXEL}
        content = [{"type": "text", "text": "row one"}, image]
        assert (await api.call(session, web["id"], "call_a", "result", content=content)).status_code == 204
        assert (await api.call(session, web["id"], "call_b", "result", text="row two")).status_code == 204
        await api.wait_for(session, run_over)
        messages = fake.requests[1]["messages"]
        if text_only:
            assert messages[2]["content"] == "row one\n[image/png, 1 KB]"
            assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
        else:
            assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
            assert messages[2]["content"] == "row one"
            url = {"url": f"data:image/png;base64,{PIXEL}"}
            assert messages[4]["content"][1:] == [{"type": "image_url", "image_url": url}]


async def test_rate_limits_wait_and_a_stream_cut_short_is_tried_again(api: Api, fake: FakeProvider) -> None:
    session = await chat_session(api, fake)
    cut = chat_stream("never finished")
    cut.frames.pop()  # the finish_reason chunk
    fake.replies = [
        Reply(429, {"error": {"message": "slow down", "code": "rate_limit_exceeded"}}, headers={"retry-after": "0"}),
        cut,
        chat_stream("ok now"),
    ]
    await api.send(session, "hi")
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[0]) == "ok now"
    assert len(fake.requests) == 3


async def test_an_error_in_the_stream_or_a_bad_key_fails_the_run_with_the_servers_words(
    api: Api, fake: FakeProvider
) -> None:
    session = await chat_session(api, fake)
    broken = chat_stream("partial")
    broken.frames.insert(2, ("", {"error": {"message": "the model crashed", "code": "invalid_request"}}))
    fake.replies = [broken]
    await api.send(session, "hi")
    events = await api.wait_for(session, run_over)
    assert "the model crashed" in of_type(events, "run_failed")[0]["error"]
    fake.replies = [Reply(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})]
    await api.send(session, "again")
    events = await api.wait_for(session, lambda es: len(of_type(es, "run_failed")) == 2)
    error = of_type(events, "run_failed")[1]["error"]
    assert "401" in error
    assert "Incorrect API key provided" in error
    assert "test-key" not in error


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tool_choice": "always"}, "tool_choice"),
        ({"reasoning_effort": "max"}, "reasoning_effort"),
        ({"context_window": -1}, "context_window"),
        ({"thinking": {"budget_tokens": 1024}}, "thinking"),
    ],
)
async def test_a_bad_model_block_is_refused_naming_the_field(
    api: Api, fake: FakeProvider, change: dict[str, Any], field: str
) -> None:
    body = {"api_key": "k", "base_url": f"{fake.url}/v1", "display_name": "vllm", "format": "openai_chat"}
    provider = (await api.key.post("/v1/model-providers", json=body)).json()
    agent = (await api.key.post("/v1/agents", json={"name": "chat"})).json()
    version = {"model_provider_id": provider["id"], "model": {**MODEL, **change}}
    answer = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)
    assert answer.status_code == 400
    assert field in answer.text


async def test_a_runs_usage_is_the_sum_of_its_steps(api: Api, fake: FakeProvider) -> None:
    session = await chat_session(api, fake)
    web = await api.register(session)
    fake.replies = [
        chat_stream("", ROW, usage=chat_usage(10, 2)),
        chat_stream("Done.", usage=chat_usage(20, 3, cached=5, reasoning=1)),
    ]
    await api.send(session, "light")
    await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert (await api.call(session, web["id"], "call_a", "result", text="lit")).status_code == 204
    events = await api.wait_for(session, run_over)
    total = {"input_tokens": 30, "output_tokens": 5, "cached_input_tokens": 5, "reasoning_tokens": 1}
    assert of_type(events, "run_completed")[0]["usage"] == total
    steps = timings(await logged(api, session, "timing"), "step")
    assert [s["usage"] for s in steps] == [
        {"input_tokens": 10, "output_tokens": 2},
        {"input_tokens": 20, "output_tokens": 3, "cached_input_tokens": 5, "reasoning_tokens": 1},
    ]


async def test_a_count_past_any_sane_size_is_left_out_and_the_run_completes(api: Api, fake: FakeProvider) -> None:
    session = await chat_session(api, fake)
    fake.replies = [chat_stream("fine", usage=chat_usage(10**17, 3))]
    await api.send(session, "hi")
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_completed")[0]["usage"] == {"output_tokens": 3}


async def test_a_server_that_streams_too_many_calls_fails_the_turn(api: Api, fake: FakeProvider) -> None:
    session = await chat_session(api, fake)
    await api.register(session)
    most = StreamLimits().calls
    calls = [ChatCall(f"call_{n}", "client__web__highlight_row", {"row_id": str(n)}) for n in range(most + 1)]
    fake.replies = [chat_stream("", *calls, style="whole")]
    await api.send(session, "all of them")
    events = await api.wait_for(session, run_over)
    error = f"the model's stream passed {most} tool calls in one step (SWITCHBOARD_MODEL_MAX_CALLS)"
    assert of_type(events, "run_failed")[0]["error"] == error
    assert not of_type(events, "client_tool_dispatched")


async def test_fields_of_the_wrong_type_are_not_written_into_the_log(api: Api, fake: FakeProvider) -> None:
    session = await chat_session(api, fake)
    await api.register(session)
    reply = chat_stream("", ChatCall("x", "client__web__highlight_row", {"row_id": "1"}), style="whole")
    for _, chunk in reply.frames:
        chunk["model"] = {"not": "a name"}
        for choice in chunk["choices"]:
            for fragment in choice["delta"].get("tool_calls", ()):
                # An id that is a number, and arguments sent as an object rather than its JSON text.
                fragment["id"] = 7
                fragment["function"]["arguments"] = {"row_id": "1"}
    fake.replies = [reply]
    await api.send(session, "light")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    (call,) = of_type(events, "tool_call")
    assert isinstance(call["call_id"], str)
    assert call["call_id"] != "7"
    assert call["arguments"] == {"row_id": "1"}
    assert of_type(events, "message_assistant")[0]["message"]["model"] is None
