"""A workspace provider's key goes only to the address it was stored for: moving a provider needs its key
with it, the key is never read back, and what a provider answers reaches run_failed as its status and
message only, whatever the size of its body."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchboard.settings import Settings
from tests.api.test_provider_addresses import body, run_failure, session_of
from tests.api.test_providers import CLAUDE, GPT
from tests.api_client import Api, of_type, run_over, running_api
from tests.fakes import FakeProvider, Reply, fake_provider, openai_stream
from tests.resolver import PUBLIC, Names

MIB = 1_048_576


@pytest.fixture
async def local(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    """A stack whose workspace providers may be the local fakes (on 127.0.0.1)."""
    async with running_api(settings, redis_url, api_key, {"provider_allow_private": True}) as api:
        yield api


async def test_a_move_without_the_key_is_400_and_changes_nothing(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    names = Names({"llm.example": [PUBLIC], "other.example": [PUBLIC]})
    async with running_api(settings, redis_url, api_key, {}, worker=False, resolver=names) as api:
        created = (await api.key.post("/v1/model-providers", json=body("https://llm.example/v1", "sk-old"))).json()
        path = f"/v1/model-providers/{created['id']}"
        # Any part of the address: scheme, host, port, path.
        for moved in (
            "http://llm.example/v1",
            "https://other.example/v1",
            "https://llm.example:8443/v1",
            "https://llm.example/v2",
            "https://llm.example/v1/",
        ):
            answer = await api.key.patch(path, json={"base_url": moved, "display_name": "moved"})
            assert answer.status_code == 400, (moved, answer.text)
            error = answer.json()["error"]
            assert error["code"] == "invalid_request"
            assert error["message"].startswith("base_url: a provider's key goes only to the address it was stored")
            assert "send api_key" in error["message"]
            assert "create a new provider" in error["message"]
        stored = await api.stack.broker.providers.get(created["id"])
        assert (stored.base_url, stored.api_key, stored.display_name) == ("https://llm.example/v1", "sk-old", "p")
        # The SDK's other updates work as before, the same base_url included.
        same = await api.key.patch(path, json={"base_url": "https://llm.example/v1", "display_name": "renamed"})
        assert same.status_code == 200, same.text
        assert same.json()["display_name"] == "renamed"
        rotated = await api.key.patch(path, json={"api_key": "sk-rotated"})
        assert rotated.status_code == 200
        assert "sk-rotated" not in rotated.text
        moved_with_key = await api.key.patch(path, json={"base_url": "https://other.example/v1", "api_key": "sk-new"})
        assert moved_with_key.status_code == 200, moved_with_key.text
        stored = await api.stack.broker.providers.get(created["id"])
        assert (stored.base_url, stored.api_key) == ("https://other.example/v1", "sk-new")
        for answer in (same, rotated, moved_with_key, await api.key.get(path)):
            assert "api_key" not in answer.json()
            assert "sk-" not in answer.text


async def test_a_key_rotated_while_the_provider_moves_stays_with_its_own_address(
    settings: Settings, redis_url: str, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key-only PATCH that read the provider before a move landed must not pair its key (meant for the
    old address) with the moved address: the two are written together, and the last writer's pair wins."""
    names = Names({"llm.example": [PUBLIC], "other.example": [PUBLIC]})
    async with running_api(settings, redis_url, api_key, {}, worker=False, resolver=names) as api:
        providers = api.stack.broker.providers
        created = (await api.key.post("/v1/model-providers", json=body("https://llm.example/v1", "sk-old"))).json()
        stale = await providers.get(created["id"])
        moved = await api.key.patch(
            f"/v1/model-providers/{created['id']}", json={"base_url": "https://other.example/v1", "api_key": "sk-B"}
        )
        assert moved.status_code == 200, moved.text

        async def read_before_the_move(provider_id: str) -> object:
            return stale

        # The rotation's read happened before the move's write.
        monkeypatch.setattr(providers, "get", read_before_the_move)
        await providers.update(created["id"], {"api_key": "sk-A2"})
        monkeypatch.undo()
        stored = await providers.get(created["id"])
        assert (stored.base_url, stored.api_key) == ("https://llm.example/v1", "sk-A2")


@pytest.mark.parametrize(("value", "words"), [("", "at least 1 character"), ("k" * 16385, "at most 16384 characters")])
async def test_a_bad_api_key_on_an_update_is_400_naming_it(api: Api, value: str, words: str) -> None:
    created = (await api.key.post("/v1/model-providers", json=body("https://llm.example/v1"))).json()
    answer = await api.key.patch(f"/v1/model-providers/{created['id']}", json={"api_key": value})
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    assert "api_key" in message, message
    assert words in message, message


async def test_a_moved_provider_sends_its_new_key_to_its_new_address_only(local: Api, fake: FakeProvider) -> None:
    async with fake_provider() as new:
        created = (await local.key.post("/v1/model-providers", json=body(f"{fake.url}/v1", "sk-old"))).json()
        fake.replies = [Reply(frames=openai_stream({"type": "message", "text": "old place"}))]
        session = await session_of(local, created["id"])
        await local.send(session, "first")
        await local.wait_for(session, run_over)
        assert [r["headers"]["authorization"] for r in fake.requests] == ["Bearer sk-old"]

        path = f"/v1/model-providers/{created['id']}"
        moved = await local.key.patch(path, json={"base_url": f"{new.url}/v1", "api_key": "sk-new"})
        assert moved.status_code == 200, moved.text
        new.replies = [Reply(frames=openai_stream({"type": "message", "text": "new place"}))]
        await local.send(session, "second")
        events = await local.wait_for(session, lambda es: len(of_type(es, "run_completed")) == 2)
        assert [r["headers"]["authorization"] for r in new.requests] == ["Bearer sk-new"]
    assert len(fake.requests) == 1
    assert of_type(events, "message_assistant")[-1]["message"]["content"][0]["data"]["text"] == "new place"


def _error_json(provider_format: str, message: str) -> dict[str, Any]:
    if provider_format == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}}


@pytest.mark.parametrize("provider_format", ["openai_responses", "anthropic"])
async def test_a_mebibyte_error_body_reaches_run_failed_as_status_and_message_only(
    local: Api, fake: FakeProvider, provider_format: str
) -> None:
    message = "the context is too long; " + "x" * MIB
    fake.replies = [Reply(400, _error_json(provider_format, message))]
    base_url = fake.url if provider_format == "anthropic" else f"{fake.url}/v1"
    created = (await local.key.post("/v1/model-providers", json={**body(base_url), "format": provider_format})).json()
    model = CLAUDE if provider_format == "anthropic" else GPT
    agent = (await local.key.post("/v1/agents", json={"name": "big"})).json()
    version = {"model_provider_id": created["id"], "model": model}
    assert (await local.key.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
    session = await local.session(agent["id"])
    await local.send(session, "hello")
    events = await local.wait_for(session, run_over)
    error = of_type(events, "run_failed")[0]["error"]
    lead = (
        "Anthropic refused the request (400): "
        if provider_format == "anthropic"
        else "the OpenAI API refused the request (400 context_length_exceeded): "
    )
    assert error == lead + message[:500] + "…"


@pytest.mark.parametrize("size", [MIB, 4 * MIB])
async def test_an_error_body_that_is_not_json_reaches_run_failed_as_the_status_alone(
    local: Api, fake: FakeProvider, size: int
) -> None:
    # Past the transport's limit (2 MiB) the body is not even read whole.
    fake.replies = [Reply(502, raw=b"<html>" + b"y" * size)] * 4
    created = (await local.key.post("/v1/model-providers", json=body(f"{fake.url}/v1"))).json()
    error = await run_failure(local, created["id"])
    assert error == "the model provider kept failing (4 attempts): the OpenAI API answered 502 : Bad Gateway", error
    assert "yyy" not in error
