"""The real Anthropic and OpenAI adapters, through the official packages, against local fake servers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import SecretStr

from broker import Broker
from broker.errors import NotFound
from broker.services.providers import ANTHROPIC_PROVIDER_ID, OPENAI_PROVIDER_ID, SCRIPTED_PROVIDER_ID
from switchboard.settings import Settings
from tests.api_client import ENDS, Api, Event, Session, of_type, run_over
from tests.fakes import (
    FakeProvider,
    Reply,
    anthropic_error,
    anthropic_stream,
    openai_failed,
    openai_stream,
)
from tests.helpers import HIGHLIGHT
from tests.stack import running_stack
from workers.models.aliases import shorten

# The fake providers listen on 127.0.0.1, a loopback address: allowed here only.
pytestmark = pytest.mark.private_providers

CLAUDE = {"format": "anthropic", "model": "claude-test", "max_tokens": 321, "thinking": {"budget_tokens": 1024}}
GPT = {"format": "openai_responses", "model": "gpt-test", "max_tokens": 222, "context_window": 8000}
GPT["reasoning_effort"] = "low"


async def provider_session(
    api: Api, fake: FakeProvider, model: dict[str, Any], *, text_only: bool = False, **config: Any
) -> Session:
    base_url = fake.url if model["format"] == "anthropic" else f"{fake.url}/v1"
    body = {"api_key": "test-key", "base_url": base_url, "display_name": "fake", "format": model["format"]}
    body["text_only"] = text_only
    provider = (await api.key.post("/v1/model-providers", json=body)).json()
    agent = (await api.key.post("/v1/agents", json={"name": "real"})).json()
    version = {"model_provider_id": provider["id"], "model": model, **config}
    assert (await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
    return await api.session(agent["id"])


def text_of(event: Event) -> str:
    return "".join(b["data"]["text"] for b in event["message"]["content"] if b["type"] == "text")


async def test_anthropic_streams_text_keeps_thinking_and_gets_the_agents_settings(api: Api, fake: FakeProvider) -> None:
    thinking = {"type": "thinking", "thinking": "pondering", "signature": "sig=="}
    fake.replies = [Reply(frames=anthropic_stream(thinking, {"type": "text", "text": "Hello there friend"}))]
    session = await provider_session(api, fake, CLAUDE, system_prompt="Be brief.")
    deltas: list[str] = []
    async with api.stream(session, include="deltas") as frames:
        await api.send(session, "hi")
        while True:
            frame = await frames.next()
            if frame.data and frame.id is None:
                delta = frame.event
                assert delta["type"] == "message_delta"
                deltas.append(delta["delta"])
            elif frame.data and frame.event["type"] in ENDS:
                assert frame.event["type"] == "run_completed", frame.event
                break
    assert "".join(deltas) == "Hello there friend"
    events = await api.events(session)
    assistant = of_type(events, "message_assistant")[0]
    assert assistant["message"]["model"] == "claude-test"
    assert assistant["message"]["content"] == [
        {"type": "thinking", "data": {"thinking": "pondering", "redacted": False, "signature": "sig=="}},
        {"type": "text", "data": {"text": "Hello there friend"}},
    ]
    sent = fake.requests[0]
    assert sent["path"] == "/v1/messages"
    # The key reaches the provider (this SDK version sends it as a bearer token; older ones as x-api-key).
    assert "test-key" in (sent["headers"].get("x-api-key", ""), sent["headers"].get("authorization", "")[7:])
    assert (sent["model"], sent["max_tokens"], sent["system"]) == ("claude-test", 321, "Be brief.")
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert "tools" not in sent


async def test_anthropic_is_sent_an_object_type_for_parameters_that_leave_it_out_or_list_it(
    api: Api, fake: FakeProvider
) -> None:
    # `{}` is any object, and a registration may say so; the Messages API takes only `"type": "object"`.
    session = await provider_session(api, fake, CLAUDE)
    nullable = {"type": ["object", "null"], "properties": {"a": {"type": "string"}}}
    await api.register(session, tools=[{"name": "any", "parameters": {}}, {"name": "maybe", "parameters": nullable}])
    fake.replies = [Reply(frames=anthropic_stream({"type": "text", "text": "ok"}))]
    await api.send(session, "hi")
    await api.wait_for(session, run_over)
    [sent] = fake.requests
    assert [tool["input_schema"] for tool in sent["tools"]] == [
        {"type": "object"},
        {"type": "object", "properties": {"a": {"type": "string"}}},
    ]


async def test_anthropic_tool_calls_with_long_names_go_out_aliased_and_come_back_real(
    api: Api, fake: FakeProvider
) -> None:
    session = await provider_session(api, fake, CLAUDE)
    tool = {"name": "t" * 40, "description": "A long one", "parameters": {"type": "object"}}
    client = await api.register(session, name="a" * 32, tools=[tool])
    visible = f"client__{'a' * 32}__{'t' * 40}"
    alias = shorten(visible)
    assert len(alias) <= 64
    thinking = {"type": "thinking", "thinking": "use the tool", "signature": "s1"}
    use = {"type": "tool_use", "id": "toolu_1", "name": alias, "input": {"row": 1}}
    fake.replies = [
        Reply(frames=anthropic_stream(thinking, use, stop="tool_use")),
        Reply(frames=anthropic_stream({"type": "text", "text": "All done."})),
    ]
    await api.send(session, "light it")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call = of_type(events, "tool_call")[0]
    assert (call["call_id"], call["name"], call["arguments"]) == ("toolu_1", visible, {"row": 1})
    dispatched = of_type(events, "client_tool_dispatched")[0]
    assert (dispatched["tool"], dispatched["call_id"]) == ("t" * 40, "toolu_1")
    await api.call(session, client["id"], "toolu_1", "result", text="lit")
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[-1]) == "All done."
    first, second = fake.requests
    assert first["tools"] == [{"name": alias, "description": "A long one", "input_schema": {"type": "object"}}]
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "lit", "is_error": False}
    assert second["messages"][1:] == [
        {"role": "assistant", "content": [thinking, use]},
        {"role": "user", "content": [result]},
    ]


async def test_transient_failures_are_retried_and_the_run_completes(api: Api, fake: FakeProvider) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake.replies = [
        Reply(529, overloaded),
        Reply(frames=[*anthropic_stream()[:1], anthropic_error("overloaded_error", "Overloaded mid-stream")]),
        Reply(frames=anthropic_stream({"type": "text", "text": "third time lucky"})),
    ]
    session = await provider_session(api, fake, CLAUDE)
    await api.send(session, "try")
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[0]) == "third time lucky"
    assert len(fake.requests) == 3


async def test_a_refusal_ends_the_run_with_the_providers_message(api: Api, fake: FakeProvider) -> None:
    bad = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}
    fake.replies = [Reply(400, bad)]
    session = await provider_session(api, fake, CLAUDE)
    await api.send(session, "try")
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_failed")[0]["error"] == "Anthropic refused the request (400): max_tokens: too large"
    assert len(fake.requests) == 1


async def test_a_model_that_keeps_failing_ends_the_run_within_its_budget(api: Api, fake: FakeProvider) -> None:
    fake.replies = [Reply(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})] * 10
    session = await provider_session(api, fake, CLAUDE)
    await api.send(session, "try")
    events = await api.wait_for(session, run_over)
    error = of_type(events, "run_failed")[0]["error"]
    assert error.startswith("the model provider kept failing (4 attempts): Anthropic answered 500 api_error: boom")
    assert len(fake.requests) == 4


async def test_openai_responses_text_function_calls_and_settings(api: Api, fake: FakeProvider) -> None:
    session = await provider_session(api, fake, GPT, system_prompt="Be kind.")
    web = await api.register(session)
    reasoning = {"type": "reasoning", "summary": "I should highlight"}
    function_call: dict[str, Any] = {
        "type": "function_call",
        "call_id": "fc_call_1",
        "name": "client__web__highlight_row",
    }
    function_call["arguments"] = {"row_id": "9"}
    fake.replies = [
        Reply(frames=openai_stream(reasoning, function_call)),
        Reply(frames=openai_stream({"type": "message", "text": "Row nine shines."})),
    ]
    await api.send(session, "highlight 9")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    kept = {"thinking": "I should highlight", "redacted": False, "signature": None}
    assert of_type(events, "message_assistant")[0]["message"]["content"][0] == {"type": "thinking", "data": kept}
    await api.call(session, web["id"], "fc_call_1", "result", text="highlighted")
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[-1]) == "Row nine shines."
    first, second = fake.requests
    assert first["path"] == "/v1/responses"
    assert first["headers"]["authorization"] == "Bearer test-key"
    assert (first["model"], first["max_output_tokens"], first["instructions"]) == ("gpt-test", 222, "Be kind.")
    assert first["reasoning"] == {"effort": "low"}
    offered = {"type": "function", "name": "client__web__highlight_row", "strict": False}
    assert first["tools"][0] == offered | {k: HIGHLIGHT[k] for k in ("description", "parameters")}
    called = {k: function_call[k] for k in ("type", "call_id", "name")} | {"arguments": '{"row_id":"9"}'}
    output = {"type": "function_call_output", "call_id": "fc_call_1", "output": "highlighted"}
    assert second["input"][1:] == [called, output]


async def test_arguments_that_are_not_json_get_an_error_result_and_the_run_goes_on(
    api: Api, fake: FakeProvider
) -> None:
    session = await provider_session(api, fake, GPT)
    await api.register(session)
    broken = {"type": "function_call", "call_id": "fc_bad", "name": "client__web__highlight_row"}
    broken["raw_arguments"] = '{"row_id": '
    fake.replies = [
        Reply(frames=openai_stream(broken)),
        Reply(frames=openai_stream({"type": "message", "text": "Sorry, let me try again."})),
    ]
    await api.send(session, "highlight")
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_completed")
    assert not of_type(events, "client_tool_dispatched")
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is True
    text = result["content"][0]["data"]["text"]
    assert text.startswith("the arguments of client__web__highlight_row could not be used: they are not valid JSON")
    # The model is told so in the next step.
    assert fake.requests[1]["input"][-1]["output"].startswith("error: the arguments of client__web__highlight_row")


async def test_openai_rate_limits_and_failed_responses_are_retried(api: Api, fake: FakeProvider) -> None:
    limited = {"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}
    fake.replies = [
        Reply(429, limited, headers={"retry-after": "0"}),
        Reply(frames=[openai_failed("server_error", "boom")]),
        Reply(frames=openai_stream({"type": "message", "text": "ok now"})),
    ]
    session = await provider_session(api, fake, GPT)
    await api.send(session, "try")
    events = await api.wait_for(session, run_over)
    assert text_of(of_type(events, "message_assistant")[0]) == "ok now"
    assert len(fake.requests) == 3


async def test_openai_bad_key_fails_the_run(api: Api, fake: FakeProvider) -> None:
    fake.replies = [Reply(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})]
    session = await provider_session(api, fake, GPT)
    await api.send(session, "try")
    events = await api.wait_for(session, run_over)
    error = of_type(events, "run_failed")[0]["error"]
    assert error == "the OpenAI API refused the request (401 invalid_api_key): Incorrect API key provided"


async def listed_providers(api: Api) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await api.key.get("/v1/model-providers")).json()["items"]
    return items


async def test_a_platform_provider_is_there_while_a_live_worker_offers_it(broker: Broker) -> None:
    async def platform_ids() -> set[str]:
        items, _ = await broker.providers.page(limit=10, after=None, ascending=True)
        return {p.id for p in items if p.type == "platform"} - {SCRIPTED_PROVIDER_ID}

    # The broker's settings hold no provider key: what is listed is what the workers offer.
    assert await platform_ids() == set()
    with pytest.raises(NotFound):
        await broker.providers.get(OPENAI_PROVIDER_ID)
    await broker.providers.offer([OPENAI_PROVIDER_ID], 500)
    assert await platform_ids() == {OPENAI_PROVIDER_ID}
    assert (await broker.providers.get(OPENAI_PROVIDER_ID)).display_name == "OpenAI"
    with pytest.raises(NotFound):
        await broker.providers.get(ANTHROPIC_PROVIDER_ID)
    # No worker renews it: gone within the lease it was offered for.
    await asyncio.sleep(0.7)
    assert await platform_ids() == set()
    with pytest.raises(NotFound):
        await broker.providers.get(OPENAI_PROVIDER_ID)


async def test_platform_providers_come_from_the_deployments_keys(
    settings: Settings, redis_url: str, api_key: str, fake: FakeProvider
) -> None:
    # Default address rules: a workspace provider on 127.0.0.1 would be refused; the deployment's own,
    # the operator's, is not checked.
    configured = settings.model_copy(
        update={
            "provider_allow_private": False,
            "bootstrap_api_key": SecretStr(api_key),
            "openai_api_key": SecretStr("sk-platform"),
            "openai_base_url": f"{fake.url}/v1",
        }
    )
    fake.replies = [Reply(frames=openai_stream({"type": "message", "text": "from the platform"}))]
    async with running_stack(configured, redis_url) as stack:
        api = Api(stack)
        try:
            # Listed once the worker, which holds the key, has offered it (its first beat).
            listed = await listed_providers(api)
            async with asyncio.timeout(5):
                while not any(p["display_name"] == "OpenAI" for p in listed):
                    await asyncio.sleep(0.05)
                    listed = await listed_providers(api)
            platform = next(p for p in listed if p["display_name"] == "OpenAI")
            assert (platform["type"], platform["format"]) == ("platform", "openai_responses")
            assert "sk-platform" not in str(listed)
            agent = (await api.key.post("/v1/agents", json={"name": "platform"})).json()
            version = {"model_provider_id": platform["id"], "model": GPT}
            await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)
            session = await api.session(agent["id"])
            await api.send(session, "hello")
            events = await api.wait_for(session, run_over)
        finally:
            await api.aclose()
    assert of_type(events, "run_completed"), events
    assert text_of(of_type(events, "message_assistant")[0]) == "from the platform"
    assert fake.requests[0]["headers"]["authorization"] == "Bearer sk-platform"
