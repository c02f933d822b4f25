"""A run's spans, read with the SDK's in-memory exporter: one trace from the input through the model to a
client's own span and back, as the GenAI semantic conventions name them."""

from __future__ import annotations

import secrets

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from common.tracing import Tracing
from switchboard.settings import Settings
from tests.api_client import Api, of_type, run_over
from tests.stack import run_worker, running_stack
from tests.tracing.spans import (
    CALL,
    CONTENT_KEYS,
    TOOL,
    attrs,
    call_and_answer,
    ids,
    named,
    parent_id,
    run_ended,
    spans_when,
    traced_api,
)

pytestmark = pytest.mark.both_redis


async def test_a_client_call_is_one_trace_from_the_run_to_the_clients_span_and_back(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session()
        web = await api.register(session)
        await api.send(session, CALL)
        events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
        (dispatched,) = of_type(events, "client_tool_dispatched")
        # What the client's own span is: a child of the call's span, whose traceparent the event carries.
        call_trace = str(dispatched["traceparent"])
        own_span = secrets.randbits(64) | 1
        trace_hex = call_trace.split("-")[1]
        call_id = await call_and_answer(api, session, web["id"], f"00-{trace_hex}-{own_span:016x}-01")
        spans = await spans_when(exporter, run_ended)
        events = await api.events(session)

    (run,) = named(spans, "invoke_agent")
    trace_id, run_span = ids(run)
    # The console's trace link reads it from the run's events.
    for kind in ("run_started", "run_completed"):
        assert [event["trace_id"] for event in of_type(events, kind)] == [f"{trace_id:032x}"]
    assert run.name == "invoke_agent agent"
    assert run.parent is None
    assert attrs(run)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(run)["gen_ai.agent.id"] == session.agent_id
    assert attrs(run)["gen_ai.agent.name"] == "agent"
    assert attrs(run)["gen_ai.conversation.id"] == session.id

    chats = named(spans, "chat ")
    assert len(chats) == 2
    for chat in chats:
        assert ids(chat)[0] == trace_id
        assert parent_id(chat) == run_span
        chat_attrs = attrs(chat)
        assert chat_attrs["gen_ai.operation.name"] == "chat"
        assert chat_attrs["gen_ai.provider.name"] == "switchboard.scripted"
        assert chat.name == f"chat {chat_attrs['gen_ai.request.model']}"
        assert "gen_ai.response.model" in chat_attrs
        assert "gen_ai.response.time_to_first_chunk" in chat_attrs
    assert [attrs(chat)["gen_ai.response.finish_reasons"] for chat in chats] == [("tool_calls",), ("stop",)]

    (tool,) = named(spans, "execute_tool")
    assert tool.name == f"execute_tool {TOOL}"
    assert ids(tool)[0] == trace_id
    assert parent_id(tool) == run_span
    assert f"{ids(tool)[1]:016x}" == call_trace.split("-")[2]
    assert attrs(tool)["gen_ai.tool.name"] == TOOL
    assert attrs(tool)["gen_ai.tool.call.id"] == call_id
    assert attrs(tool)["gen_ai.tool.type"] == "extension"
    assert "error.type" not in attrs(tool)
    assert [event.name for event in tool.events] == ["client_tool_dispatched", "client_tool_acked"]
    # The span lasts until the call settled: after the ack, before the run's end.
    assert tool.end_time is not None
    assert run.end_time is not None
    assert tool.events[-1].timestamp <= tool.end_time <= run.end_time

    # The ack and the result: server spans in the same trace, children of the client's own span.
    answers = [span for span in spans if span.name.endswith(("/ack", "/result"))]
    assert len(answers) == 2
    for answer in answers:
        assert ids(answer)[0] == trace_id
        assert parent_id(answer) == own_span
    for span in spans:
        assert not set(CONTENT_KEYS) & set(attrs(span)), span.name


@pytest.mark.short_deadlines
async def test_a_failed_call_says_why_as_its_error_type(settings: Settings, redis_url: str, api_key: str) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session()
        await api.register(session)
        await api.send(session, CALL)
        await api.wait_for(session, run_over)
        spans = await spans_when(exporter, run_ended)
    (tool,) = named(spans, "execute_tool")
    assert attrs(tool)["error.type"] == "ack_timeout"
    assert tool.status.status_code.name == "ERROR"
    (run,) = named(spans, "invoke_agent")
    assert "error.type" not in attrs(run)


async def test_content_is_on_the_spans_only_when_asked(settings: Settings, redis_url: str, api_key: str) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter, capture=True) as api:
        session = await api.session()
        web = await api.register(session)
        await api.send(session, CALL)
        await call_and_answer(api, session, web["id"])
        spans = await spans_when(exporter, run_ended)
    (tool,) = named(spans, "execute_tool")
    assert attrs(tool)["gen_ai.tool.call.arguments"] == '{"row_id":"7"}'
    assert "highlighted" in attrs(tool)["gen_ai.tool.call.result"]
    assert all("gen_ai.output.messages" in attrs(chat) for chat in named(spans, "chat "))


async def test_a_traceparent_on_the_input_makes_the_run_its_child(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    caller_trace, caller_span = secrets.randbits(128) | 1, secrets.randbits(64) | 1
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session()
        async with api.as_session(session) as client:
            sent = await client.post(
                f"/v1/sessions/{session.id}/events",
                json={"type": "input", "text": "hello"},
                headers={"traceparent": f"00-{caller_trace:032x}-{caller_span:016x}-01"},
            )
            assert sent.status_code == 200, sent.text
        await api.wait_for(session, run_over)
        spans = await spans_when(exporter, run_ended)
    (run,) = named(spans, "invoke_agent")
    assert ids(run)[0] == caller_trace
    assert parent_id(run) == caller_span
    (chat,) = named(spans, "chat ")
    assert ids(chat)[0] == caller_trace
    assert parent_id(chat) == ids(run)[1]


async def test_a_run_that_moves_between_two_workers_stays_one_trace(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    api_tracing, first, second = (Tracing.exporting_to(exporter, name) for name in ("api", "worker-1", "worker-2"))
    configured = settings.model_copy(update={"bootstrap_api_key": SecretStr(api_key)})
    async with running_stack(configured, redis_url, worker=False, tracing=(api_tracing, first)) as stack:
        api = Api(stack)
        try:
            session = await api.session()
            web = await api.register(session)
            async with run_worker(configured, redis_url, tracing=first):
                await api.send(session, CALL)
                events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
            call_id = str(of_type(events, "client_tool_dispatched")[0]["call_id"])
            # The first worker is gone; the continuation is the second's.
            async with run_worker(configured, redis_url, tracing=second):
                assert (await api.call(session, web["id"], call_id, "ack")).status_code == 200
                assert (await api.call(session, web["id"], call_id, "result", text="done")).status_code == 204
                await api.wait_for(session, run_over)
                spans = await spans_when(exporter, run_ended)
        finally:
            await api.aclose()
    chats = named(spans, "chat ")
    services = {str(chat.resource.attributes["service.name"]) for chat in chats}
    assert services == {"worker-1", "worker-2"}
    (run,) = named(spans, "invoke_agent")
    (tool,) = named(spans, "execute_tool")
    assert {ids(span)[0] for span in [*chats, tool, run]} == {ids(run)[0]}
    assert {parent_id(span) for span in [*chats, tool]} == {ids(run)[1]}


async def test_untraced_nothing_is_kept_for_a_run(api: Api) -> None:
    session = await api.session()
    sent = await api.send(session, "hello")
    events = await api.wait_for(session, run_over)
    assert not [event for event in events if "trace_id" in event or "traceparent" in event]
    core = api.stack.broker.core
    assert not await core.redis.exists(core.keys.session(session.id).trace(str(sent["run_id"])))


async def test_server_tools_are_functions_and_an_approval_is_on_the_calls_span(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session(
            server_tools=["calculate", "current_time"], server_tool_policies={"calculate": "require_approval"}
        )
        await api.send(
            session, '/call calculate {"expression": "6*7"}\n/call current_time {"timezone": "Nowhere/Land"}'
        )
        events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
        call_id = of_type(events, "approval_requested")[0]["call_id"]
        async with api.as_session(session) as client:
            allowed = await client.post(f"/v1/sessions/{session.id}/approvals/{call_id}", json={"decision": "allow"})
            assert allowed.status_code == 200
        await api.wait_for(session, run_over)
        spans = await spans_when(exporter, run_ended)
    tools = {attrs(span)["gen_ai.tool.name"]: span for span in named(spans, "execute_tool")}
    assert set(tools) == {"calculate", "current_time"}
    assert {attrs(span)["gen_ai.tool.type"] for span in tools.values()} == {"function"}
    assert [event.name for event in tools["calculate"].events] == ["approval_requested", "approval_resolved"]
    assert "error.type" not in attrs(tools["calculate"])
    assert attrs(tools["current_time"])["error.type"] == "tool_error"


async def test_a_run_cancelled_while_it_waits_has_its_spans(settings: Settings, redis_url: str, api_key: str) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session()
        await api.register(session)
        await api.send(session, CALL)
        await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
        async with api.as_session(session) as client:
            assert (await client.post(f"/v1/sessions/{session.id}/cancel")).status_code == 200
        events = await api.wait_for(session, run_over)
        spans = await spans_when(exporter, run_ended)
    (run,) = named(spans, "invoke_agent")
    assert attrs(run)["error.type"] == "cancelled"
    (cancelled,) = of_type(events, "run_cancelled")
    assert cancelled["trace_id"] == f"{ids(run)[0]:032x}"
    (tool,) = named(spans, "execute_tool")
    assert attrs(tool)["error.type"] == "run_gone"
    assert parent_id(tool) == ids(run)[1]


async def test_a_run_that_reaches_its_step_limit_as_a_step_begins_has_its_spans(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session(max_steps=1)
        web = await api.register(session)
        await api.send(session, CALL)
        await call_and_answer(api, session, web["id"])
        spans = await spans_when(exporter, run_ended)
    (run,) = named(spans, "invoke_agent")
    assert attrs(run)["error.type"] == "failed"
    (tool,) = named(spans, "execute_tool")
    assert "error.type" not in attrs(tool)
    assert len(named(spans, "chat ")) == 1


@pytest.mark.parametrize("header", ["garbage", "00-" + "f" * 4096, f"00-{'0' * 32}-{'1' * 16}-01"])
async def test_a_bad_traceparent_is_ignored_as_the_w3c_spec_says(
    settings: Settings, redis_url: str, api_key: str, header: str
) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session()
        web = await api.register(session)
        async with api.as_session(session) as client:
            sent = await client.post(
                f"/v1/sessions/{session.id}/events",
                json={"type": "input", "text": CALL},
                headers={"traceparent": header},
            )
            assert sent.status_code == 200, sent.text
        core = api.stack.broker.core
        # Nothing was kept for the caller's trace: the run starts one of its own.
        assert not await core.redis.hexists(core.keys.session(session.id).trace(sent.json()["run_id"]), "parent")
        await call_and_answer(api, session, web["id"], header)
        spans = await spans_when(exporter, run_ended)
    (run,) = named(spans, "invoke_agent")
    assert run.parent is None
    answers = [span for span in spans if span.name.endswith(("/ack", "/result"))]
    assert len(answers) == 2
    assert all(span.parent is None for span in answers)
