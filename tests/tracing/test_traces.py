"""A run's spans, read with the SDK's in-memory exporter: one trace from the input through the model to a
client's own span and back, as the GenAI semantic conventions name them."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from common.tracing import Tracing
from switchboard.settings import Settings
from switchboard.tool_member import Member, Target
from switchboard.typed_tools import Call, typed_tool
from tests.api_client import Api, Session, of_type, run_over
from tests.js_clients import drive
from tests.mcp_servers import Seen, serving
from tests.stack import run_worker, running_stack

pytestmark = pytest.mark.both_redis

TOOL = "client__web__highlight_row"
CALL = f'/call {TOOL} {{"row_id": "7"}}'
CONTENT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.output.messages")


def tracings(exporter: InMemorySpanExporter, *, capture: bool = False) -> tuple[Tracing, Tracing]:
    """An API's and a worker's tracing, as two processes would have, exporting to one place."""
    return (
        Tracing.exporting_to(exporter, "switchboard-api", capture_content=capture),
        Tracing.exporting_to(exporter, "switchboard-worker", capture_content=capture),
    )


@contextlib.asynccontextmanager
async def traced_api(
    settings: Settings, redis_url: str, api_key: str, exporter: InMemorySpanExporter, *, capture: bool = False
) -> AsyncIterator[Api]:
    configured = settings.model_copy(update={"bootstrap_api_key": SecretStr(api_key)})
    async with running_stack(configured, redis_url, tracing=tracings(exporter, capture=capture)) as stack:
        api = Api(stack)
        try:
            yield api
        finally:
            await api.aclose()


async def spans_when(
    exporter: InMemorySpanExporter, done: Callable[[Sequence[ReadableSpan]], bool], timeout: float = 10
) -> Sequence[ReadableSpan]:
    loop = asyncio.get_running_loop()
    until = loop.time() + timeout
    while True:
        spans = exporter.get_finished_spans()
        if done(spans):
            return spans
        if loop.time() > until:
            raise AssertionError(f"timed out; spans: {[span.name for span in spans]}")
        await asyncio.sleep(0.02)


def named(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


def run_ended(spans: Sequence[ReadableSpan]) -> bool:
    return bool(named(spans, "invoke_agent"))


def ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def call_and_answer(api: Api, session: Session, client_id: str, traceparent: str | None = None) -> str:
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call_id = str(of_type(events, "client_tool_dispatched")[0]["call_id"])
    headers = {"traceparent": traceparent} if traceparent else {}
    path = f"/v1/sessions/{session.id}/clients/{client_id}/calls/{call_id}"
    async with api.as_session(session) as client:
        assert (await client.post(f"{path}/ack", headers=headers)).status_code == 200
        answered = await client.post(f"{path}/result", json={"text": "highlighted"}, headers=headers)
        assert answered.status_code == 204, answered.text
    await api.wait_for(session, run_over)
    return call_id


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
    assert [attrs(chat)["gen_ai.response.finish_reasons"] for chat in chats] == [("tool_call",), ("stop",)]

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


async def test_an_mcp_grants_call_carries_its_span_in_meta(settings: Settings, redis_url: str, api_key: str) -> None:
    exporter = InMemorySpanExporter()
    seen = Seen()
    async with serving("http", seen) as kit_url:
        private = settings.model_copy(update={"provider_allow_private": True})
        async with traced_api(private, redis_url, api_key, exporter) as api:
            session = await api.session(mcp=[{"name": "kit", "url": kit_url, "default_policy": "allow"}])
            await api.send(session, '/call mcp__kit__add {"a": 2, "b": 3}')
            await api.wait_for(session, run_over, timeout=20)
            spans = await spans_when(exporter, run_ended)
    (tool,) = named(spans, "execute_tool")
    assert attrs(tool)["gen_ai.tool.type"] == "kit"
    trace_id, span_id = ids(tool)
    assert [meta.get("traceparent") for meta in seen.metas] == [f"00-{trace_id:032x}-{span_id:016x}-01"]


async def test_tools_serve_hands_its_tool_the_calls_span_and_answers_inside_it(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    handed: list[str | None] = []

    async def look(call: Call) -> str:
        """Looks."""
        handed.append(call.traceparent)
        call.progress("looking", 0.5)
        return "seen"

    tool = typed_tool(look)
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session()
        registered = await api.register(session, name="pool", tools=[tool.declaration()])
        member = Member(Target(api.stack.url, session.id, session.token, registered["id"]), {tool.name: tool}, 1)
        stop = asyncio.Event()
        serving_task = asyncio.create_task(member.serve(stop))
        try:
            await api.send(session, "/call client__pool__look")
            events = await api.wait_for(session, run_over, timeout=10)
            spans = await spans_when(exporter, run_ended)
        finally:
            stop.set()
            await asyncio.wait_for(serving_task, 10)
    (dispatched,) = of_type(events, "client_tool_dispatched")
    assert handed == [dispatched["traceparent"]]
    (tool_span,) = named(spans, "execute_tool")
    answers = [span for span in spans if span.name.endswith(("/ack", "/progress", "/result"))]
    assert sorted(span.name.rsplit("/", 1)[1] for span in answers) == ["ack", "progress", "result"]
    assert {parent_id(span) for span in answers} == {ids(tool_span)[1]}
    assert [event.name for event in tool_span.events][:2] == ["client_tool_dispatched", "client_tool_acked"]


async def test_the_browser_sdk_hands_its_tool_the_calls_span_and_answers_inside_it(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    exporter = InMemorySpanExporter()
    roomy = settings.model_copy(update={"ack_timeout_s": 10.0, "result_timeout_s": 10.0})
    async with traced_api(roomy, redis_url, api_key, exporter) as api:
        session = await api.session()
        plan = {"url": api.stack.url, "sessionId": session.id, "token": session.token}
        driving = asyncio.create_task(drive("sdk_trace_driver.mjs", plan))
        await api.wait_for(session, lambda es: bool(of_type(es, "client_registered")), timeout=30)
        await api.send(session, "/call client__web__look")
        lines = await driving
        events = await api.wait_for(session, run_over)
        spans = await spans_when(exporter, run_ended)
    (dispatched,) = of_type(events, "client_tool_dispatched")
    assert lines[0] == {"callId": dispatched["call_id"], "traceparent": dispatched["traceparent"]}
    (tool_span,) = named(spans, "execute_tool")
    answers = [span for span in spans if span.name.endswith(("/ack", "/progress", "/result"))]
    assert sorted(span.name.rsplit("/", 1)[1] for span in answers) == ["ack", "progress", "result"]
    assert {parent_id(span) for span in answers} == {ids(tool_span)[1]}


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
