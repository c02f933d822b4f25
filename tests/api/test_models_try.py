"""`switchboard models try`: one request to a stored provider, printed; or the provider's error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from broker import Broker
from broker.services.providers import SCRIPTED_PROVIDER_ID
from switchboard.cli import main
from switchboard.settings import Settings
from tests.fakes import FakeProvider, Reply, fake_provider
from tests.fakes_chat import ChatCall, chat_stream, chat_usage

# The fake providers listen on 127.0.0.1, a loopback address: allowed here only.
pytestmark = pytest.mark.private_providers

PROVIDER_ID = "0190a000-0000-7000-8000-00000000c4a7"


@pytest.fixture
async def fake(broker: Broker[Settings]) -> AsyncIterator[FakeProvider]:
    async with fake_provider() as provider:
        await broker.providers.create(
            PROVIDER_ID,
            format="openai_chat",
            display_name="local vllm",
            description="",
            base_url=f"{provider.url}/v1",
            api_key="sk-local",
        )
        yield provider


@pytest.fixture
def environment(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.redis_url is not None
    monkeypatch.setenv("SWITCHBOARD_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("SWITCHBOARD_KEY_PREFIX", settings.key_prefix)
    monkeypatch.setenv("SWITCHBOARD_PROVIDER_ALLOW_PRIVATE", "true")
    monkeypatch.setenv("SWITCHBOARD_MODEL_BACKOFF_S", "0.01")


async def tried(*args: str) -> int:
    # The command runs its own event loop, so it runs on a thread of its own here.
    return await asyncio.to_thread(main, ["models", "try", *args])


@pytest.mark.usefixtures("environment")
async def test_it_prints_the_answer_the_call_and_the_tokens(
    fake: FakeProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    call = ChatCall("call_1", "get_time", {"timezone": "Asia/Tokyo"})
    fake.replies = [chat_stream("Let me look.", call, usage=chat_usage(40, 12, cached=0), model="qwen3-8b")]
    assert await tried("--provider", PROVIDER_ID, "--model", "qwen3-8b", "--max-tokens", "64") == 0
    printed = capsys.readouterr().out
    assert "answer: Let me look." in printed
    assert 'tool call 0 (get_time): {"timezone":"Asia/Tokyo"}' in printed
    assert "tool call: get_time {'timezone': 'Asia/Tokyo'}" in printed
    assert "model: qwen3-8b" in printed
    assert "tokens: input 40 (cached 0), output 12" in printed
    (sent,) = fake.requests
    assert (sent["model"], sent["max_tokens"]) == ("qwen3-8b", 64)
    assert sent["tools"][0]["function"]["name"] == "get_time"
    assert sent["headers"]["authorization"] == "Bearer sk-local"


@pytest.mark.usefixtures("environment")
async def test_the_providers_error_is_printed_and_the_exit_code_says_so(
    fake: FakeProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.replies = [Reply(404, {"error": {"message": "model 'llama9' not found", "code": "model_not_found"}})]
    assert await tried("--provider", PROVIDER_ID, "--model", "llama9") == 1
    printed = capsys.readouterr().out
    assert "error: the OpenAI API refused the request (404 model_not_found): model 'llama9' not found" in printed
    assert "sk-local" not in printed


@pytest.mark.usefixtures("environment")
async def test_an_unknown_provider_or_the_scripted_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert await tried("--provider", "0190a000-0000-7000-8000-000000000bad", "--model", "x") == 1
    assert "error: model provider 0190a000-0000-7000-8000-000000000bad was deleted" in capsys.readouterr().out
    assert await tried("--provider", SCRIPTED_PROVIDER_ID, "--model", "scripted") == 0
    printed = capsys.readouterr().out
    assert "answer: You said: What time is it in Tokyo?" in printed
    assert "tokens: the provider sent no counts" in printed


def test_bad_arguments_are_refused_before_anything_is_sent(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--model", "m"], ["--provider", "p"], ["--provider", "p", "--model", "m", "--max-tokens", "0"]):
        with pytest.raises(SystemExit) as exited:
            main(["models", "try", *args])
        assert exited.value.code == 2
    assert "--max-tokens: 0 is less than 1" in capsys.readouterr().err


@pytest.mark.usefixtures("environment")
async def test_a_providers_escape_sequences_never_reach_the_terminal(
    fake: FakeProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.replies = [chat_stream("\x1b]0;owned\x07Hi\x1b[2J", model="m\x1b[8m")]
    assert await tried("--provider", PROVIDER_ID, "--model", "m") == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed
    assert "\x07" not in printed
    assert "answer: \\x1b]0;owned\\x07Hi\\x1b[2J" in printed
