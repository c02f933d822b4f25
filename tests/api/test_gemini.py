"""The Gemini adapter end to end through the API, against a local fake of streamGenerateContent."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchboard.settings import Settings
from tests.api.test_images import PIXEL, image
from tests.api.test_providers import text_of
from tests.api_client import ENDS, Api, Event, Session, of_type, run_over, running_api
from tests.fakes import Reply
from tests.fakes_gemini import FakeGemini, chunk, error, fake_gemini, gemini_stream, text_stream, usage
from tests.helpers import HIGHLIGHT
from tests.resolver import PUBLIC, Names

# The fake providers listen on 127.0.0.1, a loopback address: allowed here only.
pytestmark = pytest.mark.private_providers

GEMINI: dict[str, Any] = {"format": "gemini", "model": "gemini-2.5-flash", "max_tokens": 1024}
ROW = "client__web__highlight_row"


@pytest.fixture
async def fake() -> AsyncIterator[FakeGemini]:
    async with fake_gemini() as server:
        yield server


async def gemini_session(api: Api, base_url: str, model: dict[str, Any] = GEMINI, **config: Any) -> Session:
    text_only = config.pop("text_only", False)
    body = {"api_key": "test-key", "base_url": base_url, "display_name": "gemini", "format": "gemini"}
    created = await api.key.post("/v1/model-providers", json={**body, "text_only": text_only})
    assert created.status_code == 201, created.text
    agent = (await api.key.post("/v1/agents", json={"name": "gemini"})).json()
    version = {"model_provider_id": created.json()["id"], "model": model, **config}
    answer = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)
    assert answer.status_code == 201, answer.text
    return await api.session(agent["id"])


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def decoded(text: str) -> bytes:
    # The SDK sends bytes as URL-safe base64 (the API takes either alphabet): compared as bytes.
    return base64.urlsafe_b64decode(text)


async def test_text_streams_and_the_request_carries_the_agents_settings(api: Api, fake: FakeGemini) -> None:
    fake.replies = [Reply(frames=text_stream("Hello there friend"))]
    session = await gemini_session(api, fake.url, system_prompt="Be brief.")
    deltas: list[str] = []
    async with api.stream(session, include="deltas") as frames:
        await api.send(session, "hi")
        while True:
            frame = await frames.next()
            if frame.data and frame.id is None:
                assert frame.event["type"] == "message_delta"
                deltas.append(frame.event["delta"])
            elif frame.data and frame.event["type"] in ENDS:
                assert frame.event["type"] == "run_completed", frame.event
                break
    assert "".join(deltas) == "Hello there friend"
    assistant = of_type(await api.events(session), "message_assistant")[0]["message"]
    assert assistant["model"] == "gemini-2.5-flash-001"
    assert assistant["content"] == [{"type": "text", "data": {"text": "Hello there friend"}}]
    (sent,) = fake.requests
    assert (sent["path"], sent["query"]) == ("/v1beta/models/gemini-2.5-flash:streamGenerateContent", "alt=sse")
    # The key goes in its header, never in the URL (which logs and proxies keep).
    assert sent["headers"]["x-goog-api-key"] == "test-key"
    assert "test-key" not in sent["path"] + sent["query"]
    body = sent["body"]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}], "role": "user"}
    assert body["generationConfig"] == {"maxOutputTokens": 1024}
    assert "tools" not in body
    assert "toolConfig" not in body


async def test_parallel_calls_are_routed_and_answered_with_their_thought_signature_back_in_place(
    api: Api, fake: FakeGemini
) -> None:
    session = await gemini_session(api, fake.url, {**GEMINI, "tool_choice": "required"})
    web = await api.register(session)
    signature = b64(b"\x01sig+/for-the-first-call")
    first = {"functionCall": {"name": ROW, "args": {"row_id": "1"}, "id": "fc-a"}, "thoughtSignature": signature}
    second = {"functionCall": {"name": ROW, "args": {"row_id": "2"}}}
    fake.replies = [
        Reply(frames=gemini_stream(chunk({"text": "Two rows."}), chunk(first, second, finish="STOP"))),
        Reply(frames=text_stream("Both shine.")),
    ]
    await api.send(session, "highlight 1 and 2")
    events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 2)
    calls = of_type(events, "tool_call")
    assert [(c["name"], c["arguments"]) for c in calls] == [(ROW, {"row_id": "1"}), (ROW, {"row_id": "2"})]
    made = calls[1]["call_id"]
    assert calls[0]["call_id"] == "fc-a"
    assert made.startswith("gemini_call_")
    content = of_type(events, "message_assistant")[0]["message"]["content"]
    # The signature is kept in an empty thinking block right before the call it came on.
    assert [block["type"] for block in content] == ["text", "thinking", "tool_call", "tool_call"]
    assert content[1]["data"] == {"thinking": "", "redacted": False, "signature": signature}
    await api.call(session, web["id"], "fc-a", "result", text="one lit")
    await api.call(session, web["id"], made, "result", text="row 2 is gone", is_error=True)
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[-1]) == "Both shine."
    offered, answered = fake.requests
    (declarations,) = [tool["functionDeclarations"] for tool in offered["body"]["tools"]]
    assert declarations == [
        {"name": ROW, "description": HIGHLIGHT["description"], "parametersJsonSchema": HIGHLIGHT["parameters"]}
    ]
    assert offered["body"]["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    model, results = answered["body"]["contents"][1:]
    sent_signature = model["parts"][1].pop("thoughtSignature")
    assert decoded(sent_signature) == base64.b64decode(signature)
    assert model == {
        "role": "model",
        "parts": [
            {"text": "Two rows."},
            {"functionCall": {"name": ROW, "args": {"row_id": "1"}, "id": "fc-a"}},
            {"functionCall": {"name": ROW, "args": {"row_id": "2"}}},
        ],
    }
    assert results["role"] == "user"
    responses = [part["functionResponse"] for part in results["parts"]]
    assert responses[0] == {"id": "fc-a", "name": ROW, "response": {"output": "one lit"}}
    # The made id is not the model's: the response is matched by name and order.
    assert responses[1]["name"] == ROW
    assert "id" not in responses[1]
    assert responses[1]["response"] == {"error": "row 2 is gone"}


async def test_each_call_streams_as_one_tool_call_delta_of_its_whole_arguments(api: Api, fake: FakeGemini) -> None:
    session = await gemini_session(api, fake.url)
    await api.register(session)
    calls = [{"functionCall": {"name": ROW, "args": {"row_id": row}, "id": f"fc-{row}"}} for row in ("7", "8")]
    fake.replies = [Reply(frames=gemini_stream(chunk(calls[0]), chunk(calls[1], finish="STOP")))]
    seen: list[Event] = []
    async with api.stream(session, include="deltas") as frames:
        await api.send(session, "light 7 and 8")
        dispatched = 0
        while dispatched < 2:
            frame = await frames.next()
            if frame.data and frame.id is None and frame.event["type"] == "tool_call_delta":
                seen.append(frame.event)
            elif frame.data and frame.id is not None and frame.event["type"] == "client_tool_dispatched":
                dispatched += 1
    assert [(d["index"], d["call_id"], d["name"], d["delta"]) for d in seen] == [
        (0, "fc-7", ROW, '{"row_id":"7"}'),
        (1, "fc-8", ROW, '{"row_id":"8"}'),
    ]


async def test_thought_parts_become_thinking_blocks_and_stream_as_thinking_deltas(api: Api, fake: FakeGemini) -> None:
    signature = b64(b"signed-answer")
    frames = gemini_stream(
        chunk({"text": "Weighing ", "thought": True}),
        chunk({"text": "the options", "thought": True}),
        chunk({"text": "Pick B.", "thoughtSignature": signature}),
        chunk({"text": ""}, finish="STOP", usageMetadata=usage(20, 3, thoughts=11, cached=4)),
    )
    fake.replies = [Reply(frames=frames)]
    session = await gemini_session(api, fake.url, {**GEMINI, "thinking": {"budget_tokens": 512}})
    reasoned: list[str] = []
    async with api.stream(session, include="deltas,thinking") as stream:
        await api.send(session, "A or B?")
        while True:
            frame = await stream.next()
            if frame.data and frame.id is None and frame.event["type"] == "thinking_delta":
                reasoned.append(frame.event["delta"])
            elif frame.data and frame.id is not None and frame.event["type"] in ENDS:
                assert frame.event["type"] == "run_completed", frame.event
                # The run's tokens, by Gemini's count: output holds the thoughts, input the cached.
                counts = {"input_tokens": 20, "output_tokens": 14, "cached_input_tokens": 4, "reasoning_tokens": 11}
                assert frame.event["usage"] == counts
                break
    assert "".join(reasoned) == "Weighing the options"
    content = of_type(await api.events(session), "message_assistant")[0]["message"]["content"]
    assert content == [
        {"type": "thinking", "data": {"thinking": "Weighing the options", "redacted": False, "signature": None}},
        {"type": "thinking", "data": {"thinking": "", "redacted": False, "signature": signature}},
        {"type": "text", "data": {"text": "Pick B."}},
    ]
    config = fake.requests[0]["body"]["generationConfig"]
    assert config["thinkingConfig"] == {"thinkingBudget": 512, "includeThoughts": True}


async def test_rate_limits_and_server_errors_are_retried(api: Api, fake: FakeGemini) -> None:
    fake.replies = [
        Reply(429, error(429, "RESOURCE_EXHAUSTED", "Quota exceeded"), headers={"retry-after": "0"}),
        Reply(503, error(503, "UNAVAILABLE", "The model is overloaded")),
        Reply(frames=text_stream("third time lucky")),
    ]
    session = await gemini_session(api, fake.url)
    await api.send(session, "try")
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[0]) == "third time lucky"
    assert len(fake.requests) == 3


async def test_a_refusal_ends_the_run_with_the_providers_message(api: Api, fake: FakeGemini) -> None:
    fake.replies = [Reply(400, error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: must be set"))]
    session = await gemini_session(api, fake.url)
    await api.send(session, "try")
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_failed")[0]["error"] == (
        "the Gemini API refused the request (400 INVALID_ARGUMENT): * GenerateContentRequest.contents: must be set"
    )
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        (
            [{"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": usage(5, 0), "modelVersion": "g"}],
            "the Gemini API blocked the prompt (SAFETY)",
        ),
        (
            [{"candidates": [{"finishReason": "RECITATION", "index": 0}], "modelVersion": "g"}],
            "the Gemini API stopped with no answer (RECITATION)",
        ),
        (
            [{"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0}]}],
            "the Gemini API stopped with no answer (MALFORMED_FUNCTION_CALL)",
        ),
        ([{"usageMetadata": usage(5, 0), "modelVersion": "g"}], "the Gemini API returned no candidates"),
    ],
)  # fmt: skip
async def test_a_blocked_or_empty_answer_fails_the_run_saying_why(
    api: Api, fake: FakeGemini, frames: list[dict[str, Any]], expected: str
) -> None:
    fake.replies = [Reply(frames=gemini_stream(*frames))]
    session = await gemini_session(api, fake.url)
    await api.send(session, "something")
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_failed")[0]["error"] == expected
    assert len(fake.requests) == 1


@pytest.mark.parametrize("text_only", [False, True])
async def test_an_image_result_goes_as_inline_data_or_as_its_placeholder(
    api: Api, fake: FakeGemini, text_only: bool
) -> None:
    session = await gemini_session(api, fake.url, text_only=text_only)
    web = await api.register(session)
    call = {"functionCall": {"name": ROW, "args": {"row_id": "3"}, "id": "fc-img"}}
    fake.replies = [Reply(frames=gemini_stream(chunk(call, finish="STOP"))), Reply(frames=text_stream("Seen."))]
    await api.send(session, "draw row 3")
    await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    content = [{"type": "text", "text": "the row"}, image()]
    assert (await api.call(session, web["id"], "fc-img", "result", content=content)).status_code == 204
    await api.wait_for(session, run_over)
    (part,) = fake.requests[1]["body"]["contents"][-1]["parts"]
    response = part["functionResponse"]
    if text_only:
        assert response == {"id": "fc-img", "name": ROW, "response": {"output": "the row\n[image/png, 1 KB]"}}
    else:
        assert response["response"] == {"output": "the row"}
        (inline,) = response["parts"]
        assert inline["inlineData"]["mimeType"] == "image/png"
        assert decoded(inline["inlineData"]["data"]) == base64.b64decode(PIXEL)


async def test_a_workspace_gemini_provider_is_refused_when_its_name_rebinds_to_the_loopback(
    settings: Settings, redis_url: str, api_key: str, fake: FakeGemini
) -> None:
    port = fake.url.rsplit(":", 1)[1]
    names = Names({"rebind.example": [PUBLIC]})
    fake.replies = [Reply(frames=text_stream("should never be asked"))]
    update: dict[str, object] = {"provider_allow_private": False}
    async with running_api(settings, redis_url, api_key, update, resolver=names) as api:
        session = await gemini_session(api, f"http://rebind.example:{port}")
        names.answers["rebind.example"] = ["127.0.0.1"]
        await api.send(session, "hello")
        events = await api.wait_for(session, run_over)
    error = of_type(events, "run_failed")[0]["error"]
    assert error.startswith("the model provider's address is refused: rebind.example resolves to 127.0.0.1"), error
    assert fake.requests == []


async def test_the_sdk_connects_only_through_the_pinned_client_to_the_checked_address(
    settings: Settings, redis_url: str, api_key: str, fake: FakeGemini
) -> None:
    # rebind.example exists only in this test's table: the run reaches the fake only because the SDK's
    # request went through the pinned client, which connects to the address the check saw.
    port = fake.url.rsplit(":", 1)[1]
    names = Names({"rebind.example": ["127.0.0.1"]})
    fake.replies = [Reply(frames=text_stream("reached"))]
    async with running_api(settings, redis_url, api_key, {}, resolver=names) as api:
        session = await gemini_session(api, f"http://rebind.example:{port}")
        await api.send(session, "hello")
        events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[0]) == "reached"
    (sent,) = fake.requests
    assert sent["headers"]["host"] == f"rebind.example:{port}"
    assert names.asked.count("rebind.example") >= 1


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ({**GEMINI, "thinking": {"budget_tokens": 40_000}}, "budget_tokens"),
        ({**GEMINI, "thinking": {"budget_tokens": -1}}, "budget_tokens"),
        ({**GEMINI, "tool_choice": "any"}, "tool_choice"),
    ],
)
async def test_a_gemini_model_block_out_of_bounds_is_400_naming_the_field(
    api: Api, model: dict[str, Any], field: str
) -> None:
    body = {"api_key": "k", "base_url": "https://generativelanguage.googleapis.com", "display_name": "g"}
    provider = (await api.key.post("/v1/model-providers", json={**body, "format": "gemini"})).json()
    agent = (await api.key.post("/v1/agents", json={"name": "bounds"})).json()
    version = {"model_provider_id": provider["id"], "model": model}
    answer = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)
    assert answer.status_code == 400, answer.text
    assert field in answer.json()["error"]["message"]


async def test_gemini_on_vertex_through_the_providers_cloud_option(api: Api, fake: FakeGemini) -> None:
    body = {
        "format": "gemini",
        "display_name": "gemini on vertex",
        "base_url": fake.url,
        "api_key": "unused-on-vertex",
        "cloud": {"type": "vertex", "project": "proj-9", "location": "us-central1"},
        "credentials": {"access_token": "ya29.stored"},
    }
    created = await api.key.post("/v1/model-providers", json=body)
    assert created.status_code == 201, created.text
    assert "credentials" not in created.json()
    assert created.json()["cloud"] == body["cloud"]
    agent = (await api.key.post("/v1/agents", json={"name": "vertex gemini"})).json()
    version = {"model_provider_id": created.json()["id"], "model": GEMINI}
    assert (await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
    session = await api.session(agent["id"])
    fake.replies = [Reply(frames=text_stream("from vertex"))]
    await api.send(session, "hi")
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[0]) == "from vertex"
    (sent,) = fake.requests
    path = f"/v1beta1/projects/proj-9/locations/us-central1/publishers/google/models/{GEMINI['model']}"
    assert sent["path"] == f"{path}:streamGenerateContent"
    assert sent["headers"]["authorization"] == "Bearer ya29.stored"
    assert "unused-on-vertex" not in str(sent["headers"])
