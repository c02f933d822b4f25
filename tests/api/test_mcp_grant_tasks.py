"""A grant whose server answers tools/call with a task (the Tasks extension): the worker declares the
extension, polls the task at the server's interval to its result, cancels it at the server when the call
is cancelled, and ends an endless one at the grant's timeout."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from switchboard.settings import Settings
from tests.api.test_mcp_grants import answer, cancel_when, grant, settled_within, texts
from tests.api_client import Api, of_type
from tests.mcp_servers import TaskScript, tasks_app
from tests.stack import serve_asgi
from workers.mcp import tasks

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


async def test_a_server_asking_for_input_fails_the_call_saying_so(api: Api, tasks_url: str) -> None:
    session = await api.session(mcp=[grant(tasks_url, "work")])
    events = await answer(api, session, "/call mcp__work__asks")
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is True
    assert texts(result) == [tasks.ASKED]
    assert of_type(events, "run_completed")
