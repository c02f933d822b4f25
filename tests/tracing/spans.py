"""What the tracing tests share: a stack whose API and worker export to one in-memory exporter, and
readers of the spans it got."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from common.tracing import Tracing
from switchboard.settings import Settings
from switchboard.tool_member import Member, Target
from switchboard.typed_tools import Call, typed_tool
from tests.api_client import Api, Event, Session, of_type, run_over
from tests.js_clients import drive
from tests.stack import running_stack

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


async def member_call(
    api: Api, exporter: InMemorySpanExporter, look: Callable[[Call], Any]
) -> tuple[list[Event], Sequence[ReadableSpan]]:
    """`look` served as the tool `look` of a client `pool` by `switchboard tools serve`'s member, called
    once by a run: the run's events and the spans once it ended."""
    tool = typed_tool(look)
    session = await api.session()
    registered = await api.register(session, name="pool", tools=[tool.declaration()])
    member = Member(Target(api.stack.url, session.id, session.token, registered["id"]), {tool.name: tool}, 1)
    stop = asyncio.Event()
    serving = asyncio.create_task(member.serve(stop))
    try:
        await api.send(session, "/call client__pool__look")
        events = await api.wait_for(session, run_over, timeout=10)
        return events, await spans_when(exporter, run_ended)
    finally:
        stop.set()
        await asyncio.wait_for(serving, 10)


async def hook_call(
    api: Api, exporter: InMemorySpanExporter, plan: dict[str, Any]
) -> tuple[dict[str, Any], list[Event], Sequence[ReadableSpan]]:
    """The browser SDK's trace hook driver (tests/js/sdk_trace_hook_driver.mjs) given `plan` for a new
    session, which calls its tool `look` once: what the driver saw, the run's events, and the spans."""
    session = await api.session()
    base = {"url": api.stack.url, "sessionId": session.id, "token": session.token}
    driving = asyncio.create_task(drive("sdk_trace_hook_driver.mjs", base | plan))
    await api.wait_for(session, lambda es: bool(of_type(es, "client_registered")), timeout=30)
    await api.send(session, "/call client__web__look")
    (seen,) = await driving
    events = await api.wait_for(session, run_over)
    return seen, events, await spans_when(exporter, run_ended)
