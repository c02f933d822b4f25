"""Spans leave over OTLP/HTTP (protobuf) as the standard variables say, batched off the request path: a
real receiver on 127.0.0.1 decodes them; a collector that is not there slows and fails nothing."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pydantic import SecretStr
from starlette.types import Receive, Scope, Send

from broker.transport.embedded import free_port
from common.tracing import Tracing, TracingSettings
from switchboard.settings import Settings
from tests.api_client import Api, of_type, run_over
from tests.stack import running_stack, serve_asgi

TOOL = "client__web__highlight_row"
CALL = f'/call {TOOL} {{"row_id": "7"}}'


class Receiver:
    """An OTLP/HTTP trace receiver: every span of every request it took, by name."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.paths.append(scope["path"])
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scoped in resource.scope_spans:
                self.spans.extend(scoped.spans)
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/x-protobuf")]}
        )
        await send({"type": "http.response.body", "body": b""})

    def named(self, prefix: str) -> list[Any]:
        return [span for span in self.spans if span.name.startswith(prefix)]


async def _client_call(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, CALL)
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call_id = str(of_type(events, "client_tool_dispatched")[0]["call_id"])
    assert (await api.call(session, web["id"], call_id, "ack")).status_code == 200
    assert (await api.call(session, web["id"], call_id, "result", text="done")).status_code == 204
    await api.wait_for(session, run_over)


@pytest.fixture
def otlp_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    return monkeypatch


@contextlib.asynccontextmanager
async def traced_stack(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    """A stack whose API and worker trace as the environment says, as `switchboard api` and `worker` do."""
    api_tracing = Tracing.start(TracingSettings(), "switchboard-api")
    worker_tracing = Tracing.start(TracingSettings(), "switchboard-worker")
    assert api_tracing.enabled
    assert worker_tracing.enabled
    configured = settings.model_copy(update={"bootstrap_api_key": SecretStr(api_key)})
    try:
        async with running_stack(configured, redis_url, tracing=(api_tracing, worker_tracing)) as stack:
            api = Api(stack)
            try:
                yield api
            finally:
                await api.aclose()
    finally:
        await asyncio.gather(asyncio.to_thread(api_tracing.shutdown), asyncio.to_thread(worker_tracing.shutdown))


async def test_spans_reach_an_otlp_receiver_as_protobuf(
    settings: Settings, redis_url: str, api_key: str, otlp_env: pytest.MonkeyPatch
) -> None:
    receiver = Receiver()
    async with serve_asgi(receiver) as url:
        otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        otlp_env.setenv("OTEL_SERVICE_NAME", "sb-under-test")
        async with traced_stack(settings, redis_url, api_key) as api:
            await _client_call(api)
            loop = asyncio.get_running_loop()
            until = loop.time() + 10
            while not receiver.named("invoke_agent") and loop.time() < until:
                await asyncio.sleep(0.05)
    assert set(receiver.paths) == {"/v1/traces"}
    (run,) = receiver.named("invoke_agent")
    (tool,) = receiver.named("execute_tool")
    chats = receiver.named("chat ")
    assert len(chats) == 2
    assert {span.trace_id for span in [run, tool, *chats]} == {run.trace_id}
    assert {span.parent_span_id for span in [tool, *chats]} == {run.span_id}
    attributes = {item.key: item.value.string_value for item in tool.attributes}
    assert attributes["gen_ai.tool.type"] == "extension"
    assert [event.name for event in tool.events] == ["client_tool_dispatched", "client_tool_acked"]


async def test_an_unreachable_collector_slows_and_fails_nothing(
    settings: Settings, redis_url: str, api_key: str, otlp_env: pytest.MonkeyPatch
) -> None:
    # Nothing listens there.
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    async with traced_stack(settings, redis_url, api_key) as api:
        started = time.monotonic()
        for _ in range(3):
            await _client_call(api)
        # Three runs with a client call each: well under the exporter's timeout, which no request waits on.
        assert time.monotonic() - started < 2
