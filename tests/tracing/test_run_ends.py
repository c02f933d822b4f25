"""A run that no step's worker ends still ends its `invoke_agent` span, made by whichever process notices
(the run's trace context is in Redis): the API that deletes its session (`session_deleted`), the worker
whose timekeeper gives up on a step whose workers keep stopping (`worker_stopped`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import cast

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from broker import Broker
from broker.run_spans import RunSpans
from common.tracing import Tracing
from switchboard.settings import Settings
from tests.api_client import of_type
from tests.helpers import make_session, start_run, types
from tests.stack import opened_broker
from tests.tracing.spans import CALL, attrs, ids, named, run_ended, spans_when, traced_api
from workers.keeper import Keeper
from workers.timekeeper import Timekeeper

pytestmark = pytest.mark.both_redis


async def test_a_run_whose_session_is_deleted_ends_its_span(settings: Settings, redis_url: str, api_key: str) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session()
        await api.register(session)
        await api.send(session, CALL)
        events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
        (started,) = of_type(events, "run_started")
        assert (await api.key.delete(f"/v1/sessions/{session.id}")).status_code == 204
        spans = await spans_when(exporter, run_ended)
    (run,) = named(spans, "invoke_agent")
    assert attrs(run)["error.type"] == "session_deleted"
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["switchboard.run.id"] == started["run_id"]
    assert attrs(run)["gen_ai.conversation.id"] == session.id
    # The agent is named although its session is gone.
    assert run.name == f"invoke_agent {attrs(run)['gen_ai.agent.name']}"
    assert attrs(run)["gen_ai.agent.id"]
    # The same trace as the run's chat span, which the worker made.
    (chat,) = named(spans, "chat ")
    assert ids(chat)[0] == ids(run)[0]


async def test_deleting_an_idle_session_makes_no_span(settings: Settings, redis_url: str, api_key: str) -> None:
    exporter = InMemorySpanExporter()
    async with traced_api(settings, redis_url, api_key, exporter) as api:
        session = await api.session()
        assert (await api.key.delete(f"/v1/sessions/{session.id}")).status_code == 204
        assert (await api.key.delete(f"/v1/sessions/{session.id}")).status_code == 404
    assert named(exporter.get_finished_spans(), "invoke_agent") == []


@contextlib.asynccontextmanager
async def keeping(broker: Broker, tracing: Tracing) -> AsyncIterator[None]:
    """A worker's timekeeping alone (no work taken), tracing as `tracing` says."""
    timekeeper = Timekeeper(broker, "w-test", lambda _: None, RunSpans(tracing, broker))
    keeper = Keeper(
        cast("Broker[Settings]", broker),
        "w-test",
        "test-host",
        visit=timekeeper.visit,
        visit_many=timekeeper.visit_many,
        work=lambda _: None,
    )
    await keeper.start()
    try:
        yield
    finally:
        await keeper.stop()


async def test_a_run_whose_step_keeps_losing_its_worker_ends_its_span(settings: Settings, redis_url: str) -> None:
    exporter = InMemorySpanExporter()
    tracing = Tracing.exporting_to(exporter, "switchboard-worker")
    short = settings.model_copy(update={"step_lease_s": 1.0})
    async with opened_broker(short, redis_url) as broker:
        session_id = await make_session(broker)
        run = await start_run(broker, session_id, "hello")
        async with keeping(broker, tracing):
            # Each try is taken by a "worker" that dies at once: nobody renews the 1 s lease.
            for attempt in range(1, 4):
                async with asyncio.timeout(5):
                    while await broker.runs.begin(session_id, run, 0, attempt, 25) != "run":
                        await asyncio.sleep(0.05)
            spans = await spans_when(exporter, run_ended)
        assert "run_failed" in await types(broker, session_id)
    (made,) = named(spans, "invoke_agent")
    assert attrs(made)["error.type"] == "worker_stopped"
    assert attrs(made)["switchboard.run.id"] == run
    assert made.name == "invoke_agent test agent"
