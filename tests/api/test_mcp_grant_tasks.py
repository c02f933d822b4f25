"""A grant whose server answers tools/call with a task (the Tasks extension): the worker declares the
extension, polls the task at the server's interval to its result, cancels it at the server when the call
is cancelled, and ends an endless one at the grant's timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from switchboard.settings import Settings
from tests.api.test_mcp_grants import answer, cancel_when, grant, settled_within, texts
from tests.api_client import Api, of_type, run_over
from tests.mcp_servers import TaskScript, tasks_app
from tests.stack import run_worker, running_stack, serve_asgi

# The call's cancel and result go through the broker's scripts: on the Cluster as well.
pytestmark = pytest.mark.both_redis


@pytest.fixture
def script() -> TaskScript:
    return TaskScript()


@pytest.fixture
async def tasks_url(script: TaskScript) -> AsyncIterator[str]:
    async with serve_asgi(tasks_app(script)) as url:
        yield f"{url}/mcp"


@pytest.fixture
def settings(settings: Settings, tasks_url: str) -> Settings:
    # The task server listens on 127.0.0.1, allowed here only (it comes first so that it stops last).
    return settings.model_copy(update={"provider_allow_private": True})


async def test_a_task_is_polled_to_its_result(api: Api, tasks_url: str, script: TaskScript) -> None:
    script.polls = 3
    session = await api.session(mcp=[grant(tasks_url, "work")])
    events = await answer(api, session, "/call mcp__work__slow")
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is False
    assert texts(result) == ["done after 3 polls"]
    assert script.gets == 3
    assert of_type(events, "run_completed")


async def test_an_endless_task_ends_at_the_grants_timeout_and_is_cancelled(
    api: Api, tasks_url: str, script: TaskScript
) -> None:
    script.polls = None
    session = await api.session(mcp=[grant(tasks_url, "work", timeout_s=2)])
    events = await answer(api, session, "/call mcp__work__slow")
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is True
    assert "did not finish within the tool's 2 s" in texts(result)[0]
    assert script.cancelled == ["task-1"]
    assert script.gets >= 2


async def test_a_cancelled_call_cancels_its_task_at_the_server(api: Api, tasks_url: str, script: TaskScript) -> None:
    script.polls = None
    session = await api.session(mcp=[grant(tasks_url, "work")])
    result = await cancel_when(api, session, "/call mcp__work__slow", lambda: bool(script.gets))
    assert result["is_error"] is True
    await settled_within(lambda: bool(script.cancelled))
    assert script.cancelled == ["task-1"]


async def test_no_worker_holds_a_task_between_polls_and_a_second_worker_finishes_it(
    settings: Settings, redis_url: str, api_key: str, tasks_url: str, script: TaskScript
) -> None:
    script.polls, script.interval_ms = 8, 500
    configured = settings.model_copy(update={"bootstrap_api_key": SecretStr(api_key)})
    async with running_stack(configured, redis_url, worker=False) as stack:
        api = Api(stack)
        try:
            session = await api.session(mcp=[grant(tasks_url, "work")])
            async with run_worker(configured, redis_url):
                await api.send(session, "/call mcp__work__slow")
                await settled_within(lambda: script.gets >= 2)
                assert 2 <= script.gets < 8
            # The first worker is gone with the task still working: the call is parked in Redis, not failed.
            stopped_at = script.gets
            (call,) = of_type(await api.events(session), "tool_call")
            assert not of_type(await api.events(session), "tool_result")
            record = await stack.broker.calls.record(session.id, call["call_id"])
            assert record is not None
            assert record.state in ("parked", "queued")
            async with run_worker(configured, redis_url):
                events = await api.wait_for(session, run_over, timeout=20)
            (result,) = of_type(events, "tool_result")
            assert result["is_error"] is False
            assert texts(result) == ["done after 8 polls"]
            assert script.gets == 8 > stopped_at
            assert script.cancelled == []
        finally:
            await api.aclose()


async def test_a_cancelled_run_cancels_its_parked_task_at_the_server(
    api: Api, tasks_url: str, script: TaskScript
) -> None:
    script.polls = None
    session = await api.session(mcp=[grant(tasks_url, "work")])
    await api.send(session, "/call mcp__work__slow")
    await settled_within(lambda: script.gets >= 1)
    cancelled = await api.key.post(f"/v1/sessions/{session.id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    events = await api.wait_for(session, run_over, timeout=15)
    assert of_type(events, "run_cancelled")
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is True
    # No worker held the call when the run ended: the cancel owed at the server is taken up as work.
    await settled_within(lambda: bool(script.cancelled))
    assert script.cancelled == ["task-1"]
    gets = script.gets
    await asyncio.sleep(1)
    assert script.gets == gets
