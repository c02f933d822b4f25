"""The Gemini adapter on its own: Vertex AI's path and credentials, usage counts, the transcript's
mapping back to parts (thought signatures on the parts they came with)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from google.genai import types

from broker.services.runs import PlannedCall
from common.codec import dumps
from common.events.build import text_block, thinking_block, tool_call_block
from common.events.catalogue import MessageBlock
from tests.fakes import Reply
from tests.fakes_gemini import FakeGemini, chunk, error, fake_gemini, gemini_stream, text_stream, usage
from workers.config import RunConfig
from workers.models.aliases import Aliases
from workers.models.base import (
    Endpoint,
    Message,
    ModelError,
    ModelRequest,
    ToolOutcome,
    ToolSpec,
    TransientModelError,
    Usage,
    without_images,
)
from workers.models.gemini import Gemini, usage_of
from workers.models.gemini_wire import MADE_ID, to_contents
from workers.models.retry import RetryLater

CONFIG = RunConfig(format="gemini", model="gemini-2.5-flash", max_tokens=100)
HELLO = ModelRequest(CONFIG, [Message("user", "hello")], [])


class Deltas:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def text(self, piece: str) -> None:
        self.seen.append(("text", piece))

    def reasoning(self, piece: str) -> None:
        self.seen.append(("reasoning", piece))

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        self.seen.append(("tool_input", (index, call_id, name, piece)))

    def restart(self) -> None:
        self.seen.append(("restart", None))


@pytest.fixture
async def fake() -> AsyncIterator[FakeGemini]:
    async with fake_gemini() as server:
        yield server


def vertex(fake: FakeGemini, credentials: dict[str, str] | None) -> Endpoint:
    cloud = {"type": "vertex", "project": "proj-1", "location": "europe-west4"}
    return Endpoint(fake.url, "", 10.0, cloud=cloud, credentials=credentials)


async def test_vertex_ai_is_reached_on_its_path_with_the_access_token(fake: FakeGemini) -> None:
    fake.replies = [Reply(frames=text_stream("from vertex"))]
    model = Gemini(vertex(fake, {"access_token": "ya29.token"}))
    config = RunConfig(format="gemini", model="gemini-2.5-flash", max_tokens=100, thinking_budget=64)
    call = tool_call_block("fc_1", "lookup", {"q": 1})
    transcript = [
        Message("user", "hello"),
        Message("assistant", content=as_logged([call]), calls=[PlannedCall("fc_1", "lookup", {"q": 1}, "")]),
        Message("tool", result=ToolOutcome("fc_1", "seen", False, images=(("image/png", sig(b"png")),))),
    ]
    request = ModelRequest(config, transcript, [ToolSpec("lookup", "Look it up.", {"type": "object"})])
    try:
        turn = await model.turn(request, Deltas())
    finally:
        await model.aclose()
    assert turn.content == [text_block("from vertex")]
    (sent,) = fake.requests
    path = "/v1beta1/projects/proj-1/locations/europe-west4/publishers/google/models/gemini-2.5-flash"
    assert (sent["path"], sent["query"]) == (f"{path}:streamGenerateContent", "alt=sse")
    assert sent["headers"]["authorization"] == "Bearer ya29.token"
    assert "x-goog-api-key" not in sent["headers"]
    body = sent["body"]
    assert body["contents"][0] == {"role": "user", "parts": [{"text": "hello"}]}
    assert body["contents"][1]["parts"] == [{"functionCall": {"id": "fc_1", "name": "lookup", "args": {"q": 1}}}]
    (answer,) = body["contents"][2]["parts"]
    assert answer["functionResponse"]["response"] == {"output": "seen"}
    assert answer["functionResponse"]["parts"][0]["inlineData"]["mimeType"] == "image/png"
    assert body["tools"] == [{"functionDeclarations": [{"name": "lookup", "description": "Look it up.",
                                                         "parametersJsonSchema": {"type": "object"}}]}]  # fmt: skip
    assert body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 64, "includeThoughts": True}


@pytest.mark.parametrize(
    ("credentials", "words"),
    [
        ({"service_account": dumps({"type": "service_account", "token_uri": "https://evil.example/token"})},
         "must use the token_uri https://oauth2.googleapis.com/token"),
        ({"service_account": "{not json"}, "is not JSON"),
        ({"service_account": dumps({"token_uri": "https://oauth2.googleapis.com/token"})}, "cannot be used"),
        ({"password": "x"}, "neither an access_token nor a service_account key"),
        # None stored is not the worker's own identity (that is None, "environment", which the API gates).
        ({}, "neither an access_token nor a service_account key"),
    ],
)  # fmt: skip
async def test_vertex_credentials_that_cannot_be_used_are_refused(
    fake: FakeGemini, credentials: dict[str, str], words: str
) -> None:
    with pytest.raises(ModelError, match=words):
        Gemini(vertex(fake, credentials))
    assert fake.requests == []


async def test_a_vertex_provider_without_project_or_location_and_a_keyless_gemini_one_are_refused() -> None:
    with pytest.raises(ModelError, match="needs its cloud's project and location"):
        Gemini(Endpoint("https://x.example", "", 5.0, cloud={"type": "vertex", "project": "p"}))
    # Not GOOGLE_API_KEY from the worker's environment instead.
    with pytest.raises(ModelError, match="has no API key"):
        Gemini(Endpoint("https://x.example", "", 5.0))


def test_usage_counts_thoughts_inside_the_output_and_the_cached_inside_the_input() -> None:
    metadata = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=120, candidates_token_count=30, thoughts_token_count=50, cached_content_token_count=100
    )
    assert usage_of(metadata) == Usage(120, 80, 100, 50)
    assert usage_of(types.GenerateContentResponseUsageMetadata(prompt_token_count=5)) == Usage(5, None, None, None)
    assert usage_of(None) is None


async def test_the_turn_gets_the_last_usage_and_the_model_version(fake: FakeGemini) -> None:
    frames = gemini_stream(
        chunk({"text": "a"}, usageMetadata=usage(9, 1)),
        chunk({"text": "b"}, finish="STOP", usageMetadata=usage(9, 2, thoughts=4, cached=8)),
    )
    fake.replies = [Reply(frames=frames)]
    model = Gemini(Endpoint(fake.url, "k", 10.0))
    try:
        turn = await model.turn(HELLO, Deltas())
    finally:
        await model.aclose()
    assert (turn.model, turn.usage) == ("gemini-2.5-flash-001", Usage(9, 6, 8, 4))


def as_logged(blocks: list[dict[str, Any]]) -> list[MessageBlock]:
    """Blocks as a turn writes them, read back as the transcript reads the log."""
    return msgspec.convert(blocks, list[MessageBlock])


def sig(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_signatures_go_back_on_their_parts_and_made_ids_are_not_sent() -> None:
    made = f"{MADE_ID}abc"
    content = [
        thinking_block("planning", signature=sig(b"on-thought")),
        thinking_block("", signature=sig(b"on-call")),
        tool_call_block("fc_1", "lookup", {"q": 1}),
        tool_call_block(made, "lookup", {"q": 2}),
        text_block("done"),
        thinking_block("", signature=sig(b"trailing")),
    ]
    calls = [PlannedCall("fc_1", "lookup", {"q": 1}, ""), PlannedCall(made, "lookup", {"q": 2}, "")]
    transcript = [
        Message("user", "go"),
        Message("assistant", content=as_logged(content), calls=calls),
        Message("tool", result=ToolOutcome("fc_1", "one", False)),
        Message("tool", result=ToolOutcome(made, "nope", True, images=(("image/png", sig(b"png")),))),
    ]
    wire = [c.model_dump(exclude_none=True) for c in to_contents(transcript, Aliases(["lookup"]))]
    assert wire[1] == {
        "role": "model",
        "parts": [
            {"text": "planning", "thought": True, "thought_signature": b"on-thought"},
            {"function_call": {"id": "fc_1", "name": "lookup", "args": {"q": 1}}, "thought_signature": b"on-call"},
            {"function_call": {"name": "lookup", "args": {"q": 2}}},
            {"text": "done"},
            {"text": "", "thought_signature": b"trailing"},
        ],
    }
    image = {"inline_data": {"mime_type": "image/png", "data": b"png"}}
    assert wire[2] == {
        "role": "user",
        "parts": [
            {"function_response": {"id": "fc_1", "name": "lookup", "response": {"output": "one"}}},
            {"function_response": {"name": "lookup", "response": {"error": "nope"}, "parts": [image]}},
        ],
    }
    # A provider that takes no images gets their placeholders in the text.
    text_only = to_contents(without_images(transcript), Aliases(["lookup"]))[2].parts or []
    response = text_only[1].function_response
    assert response is not None
    assert response.parts is None
    assert response.response == {"error": "nope\n[image/png, 1 KB]"}


async def turn_against(fake: FakeGemini, endpoint: Endpoint | None = None) -> Any:
    model = Gemini(endpoint or Endpoint(fake.url, "k", 10.0))
    try:
        return await model.turn(HELLO, Deltas())
    finally:
        await model.aclose()


async def test_an_error_in_the_stream_and_a_retry_delay_in_the_details_are_read(fake: FakeGemini) -> None:
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.5s"}
    fake.replies = [
        Reply(frames=[*text_stream("partial")[:1], ("", error(503, "UNAVAILABLE", "overloaded mid-stream"))]),
        Reply(429, error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", details=[retry_info])),
    ]
    with pytest.raises(RetryLater, match="the Gemini API answered 503 UNAVAILABLE: overloaded mid-stream"):
        await turn_against(fake)
    with pytest.raises(RetryLater) as limited:
        await turn_against(fake)
    assert str(limited.value) == "the Gemini API answered 429 RESOURCE_EXHAUSTED: Quota exceeded"
    assert limited.value.wait_s == 2.5


async def test_an_error_vertex_ai_sends_over_lines_mid_stream_is_read_as_the_providers(fake: FakeGemini) -> None:
    # Pretty-printed, with no `data: `: the SDK holds such lines across blank ones until their braces
    # balance, and the wire guard counts them (workers/models/gemini_lines.py) without refusing a real one.
    lines = json.dumps(error(429, "RESOURCE_EXHAUSTED", "Resource exhausted. Please try again later."), indent=2)
    bare = lines.replace("\n", "\r\n\r\n", 2) + "\r\n"
    fake.replies = [Reply(frames=[*text_stream("partial")[:1], ("bare", {"raw": bare})])]
    with pytest.raises(RetryLater, match=r"^the Gemini API answered 429 RESOURCE_EXHAUSTED: Resource exhausted\."):
        await turn_against(fake, vertex(fake, {"access_token": "t"}))


async def test_a_provider_that_cannot_be_reached_is_a_transient_failure(fake: FakeGemini) -> None:
    # A port nothing listens on (the fake's own, once it is gone).
    async with fake_gemini() as gone:
        url = gone.url
    with pytest.raises(TransientModelError, match="the Gemini API could not be reached"):
        await turn_against(fake, Endpoint(url, "k", 5.0))


async def test_vertex_ai_says_why_it_stopped_with_no_answer(fake: FakeGemini) -> None:
    stopped = {"finishReason": "SAFETY", "finishMessage": "The response was blocked.", "index": 0}
    fake.replies = [Reply(frames=gemini_stream({"candidates": [stopped]}))]
    with pytest.raises(
        ModelError, match=r"^the Gemini API stopped with no answer \(SAFETY\): The response was blocked\.$"
    ):
        await turn_against(fake, vertex(fake, {"access_token": "t"}))


async def test_max_tokens_ends_a_turn_with_what_came_and_fails_one_with_nothing(fake: FakeGemini) -> None:
    fake.replies = [
        Reply(frames=gemini_stream(chunk({"text": "cut sho"}, finish="MAX_TOKENS"))),
        Reply(frames=gemini_stream(chunk(finish="MAX_TOKENS", usageMetadata=usage(5, 0, thoughts=100)))),
    ]
    assert (await turn_against(fake)).content == [text_block("cut sho")]
    with pytest.raises(ModelError) as empty:
        await turn_against(fake)
    assert str(empty.value) == "the Gemini API stopped with no answer (MAX_TOKENS)"


async def test_a_chunk_that_is_not_json_fails_the_turn(fake: FakeGemini) -> None:
    fake.replies = [Reply(frames=[*gemini_stream(chunk({"text": "a"})), ("raw", {"raw": "{not json"})])]
    with pytest.raises(ModelError, match="the Gemini API sent what could not be read"):
        await turn_against(fake)
