"""A chat span's `gen_ai.response.finish_reasons` comes from the model turn: each adapter keeps why its
provider said the model stopped, and the tracer names it with the conventions' common values (`stop`,
`tool_calls`, `length`, `content_filter`); a provider that says nothing (the scripted model) is read from
whether the model called tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from broker.services.providers import ProviderFormat
from tests.fakes import FakeProvider, Reply, anthropic_stream, fake_provider, openai_stream
from tests.fakes_chat import ChatCall, chat_stream
from tests.fakes_gemini import FakeGemini, chunk, fake_gemini, gemini_stream
from workers.config import RunConfig
from workers.models.aliases import Aliases
from workers.models.anthropic_messages import AnthropicMessages
from workers.models.assembler import Assembler
from workers.models.base import Endpoint, Message, Model, ModelRequest, StreamLimits, Turn
from workers.models.bounds import Tally
from workers.models.gemini import Gemini
from workers.models.openai_chat import OpenAIChat
from workers.models.openai_responses import OpenAIResponses
from workers.tracing import finish_reason

CALL = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": 1}}


class Deltas:
    def text(self, piece: str) -> None:
        pass

    def reasoning(self, piece: str) -> None:
        pass

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        pass

    def restart(self) -> None:
        pass


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with fake_provider() as server:
        yield server


@pytest.fixture
async def gemini() -> AsyncIterator[FakeGemini]:
    async with fake_gemini() as server:
        yield server


async def _turn(model: Model, format_: ProviderFormat) -> Turn:
    request = ModelRequest(RunConfig(format=format_, model="m", max_tokens=100), [Message("user", "hi")], [])
    try:
        return await model.turn(request, Deltas())
    finally:
        await model.aclose()


@pytest.mark.parametrize(
    ("stop", "blocks", "said", "named"),
    [
        ("end_turn", [{"type": "text", "text": "hi"}], "end_turn", "stop"),
        ("tool_use", [CALL], "tool_use", "tool_calls"),
        ("max_tokens", [{"type": "text", "text": "cut"}], "max_tokens", "length"),
        ("refusal", [{"type": "text", "text": "no"}], "refusal", "content_filter"),
        ("pause_turn", [{"type": "text", "text": "wait"}], "pause_turn", "pause_turn"),
    ],
)
async def test_anthropic(fake: FakeProvider, stop: str, blocks: list[dict[str, Any]], said: str, named: str) -> None:
    fake.replies = [Reply(frames=anthropic_stream(*blocks, stop=stop))]
    turn = await _turn(AnthropicMessages(Endpoint(fake.url, "k", 10.0)), "anthropic")
    assert (turn.finish_reason, finish_reason(turn)) == (said, named)


@pytest.mark.parametrize(
    ("finish", "calls", "named"),
    [("stop", (), "stop"), ("tool_calls", (ChatCall("c1", "lookup", "{}"),), "tool_calls"), ("length", (), "length")],
)
async def test_openai_chat(fake: FakeProvider, finish: str, calls: tuple[ChatCall, ...], named: str) -> None:
    fake.replies = [chat_stream("some text", *calls, finish=finish)]
    turn = await _turn(OpenAIChat(Endpoint(f"{fake.url}/v1", "k", 10.0)), "openai_chat")
    assert (turn.finish_reason, finish_reason(turn)) == (finish, named)


async def test_openai_responses_completed_and_incomplete(fake: FakeProvider) -> None:
    called = openai_stream({"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"})
    answered = openai_stream({"type": "message", "text": "done"})
    cut = openai_stream({"type": "message", "text": "cut sho"})
    _, last = cut[-1]
    response = {**last["response"], "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
    cut[-1] = ("response.incomplete", {**last, "type": "response.incomplete", "response": response})
    fake.replies = [Reply(frames=called), Reply(frames=answered), Reply(frames=cut)]
    turns = [await _turn(OpenAIResponses(Endpoint(f"{fake.url}/v1", "k", 10.0)), "openai_responses") for _ in "abc"]
    assert [(turn.finish_reason, finish_reason(turn)) for turn in turns] == [
        (None, "tool_calls"),
        (None, "stop"),
        ("max_output_tokens", "length"),
    ]


@pytest.mark.parametrize(
    ("finish", "parts", "named"),
    [
        ("STOP", [{"text": "hi"}], "stop"),
        # Gemini says STOP when it called a function: the turn's calls say why it stopped.
        ("STOP", [{"functionCall": {"name": "lookup", "args": {}}}], "tool_calls"),
        ("MAX_TOKENS", [{"text": "cut"}], "length"),
        ("SAFETY", [{"text": "partly"}], "content_filter"),
    ],
)
async def test_gemini(gemini: FakeGemini, finish: str, parts: list[dict[str, Any]], named: str) -> None:
    gemini.replies = [Reply(frames=gemini_stream(chunk(*parts, finish=finish)))]
    turn = await _turn(Gemini(Endpoint(gemini.url, "k", 10.0)), "gemini")
    assert (turn.finish_reason, finish_reason(turn)) == (finish, named)


def test_a_turn_whose_provider_said_nothing_is_read_from_its_calls() -> None:
    assert finish_reason(Turn([], [], None)) == "stop"


def test_a_long_reason_is_cut() -> None:
    built = Assembler(Tally(StreamLimits()), Aliases([]))
    built.finish("x" * 1000)
    built.finish(7)
    assert built.turn().finish_reason == "x" * 64
