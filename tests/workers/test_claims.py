"""A job a worker took but never began (the worker died, or hangs, in between) is taken again after one
lease, not after arq's job timeout: arq's claim on a job is a lease like the step's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from broker.runs import Runs
from broker.server_calls import ServerCalls
from broker.settings import Settings
from tests.api_client import Api, of_type, run_over, types


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # arq's own claim would hold a taken job for step_timeout_s + 10 s: far past what the test waits.
    return settings.model_copy(update={"step_timeout_s": 120.0})


class FirstCallHangs:
    """Wraps an async method so that its first call waits until `release`, as a worker that took a job
    and then stopped would; later calls pass straight through."""

    def __init__(self, method: Callable[..., Awaitable[Any]]) -> None:
        self._method = method
        self.released = asyncio.Event()
        self.calls = 0

    def __get__(self, instance: object, owner: type) -> Callable[..., Awaitable[Any]]:
        async def bound(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == 1:
                await self.released.wait()
            return await self._method(instance, *args, **kwargs)

        return bound


@contextlib.contextmanager
def first_call_hangs(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> Iterator[FirstCallHangs]:
    hang = FirstCallHangs(getattr(owner, name))
    monkeypatch.setattr(owner, name, hang)
    try:
        yield hang
    finally:
        # A worker waiting in the hang would hold the test's teardown (the drain waits for its jobs).
        hang.released.set()


@pytest.fixture
def hung_step(monkeypatch: pytest.MonkeyPatch) -> Iterator[FirstCallHangs]:
    with first_call_hangs(monkeypatch, Runs, "begin") as hang:
        yield hang


@pytest.fixture
def hung_tool(monkeypatch: pytest.MonkeyPatch) -> Iterator[FirstCallHangs]:
    with first_call_hangs(monkeypatch, ServerCalls, "begin") as hang:
        yield hang


async def test_a_step_job_taken_and_never_begun_is_taken_again(api: Api, hung_step: FirstCallHangs) -> None:
    session = await api.session()
    await api.send(session, "hello")
    events = await api.wait_for(session, run_over, timeout=8)
    assert hung_step.calls >= 2
    # The first taker wakes up late: the step is no longer its to begin, so it changes nothing.
    hung_step.released.set()
    await asyncio.sleep(0.3)
    events = await api.events(session)
    assert types(events).count("run_started") == 1
    assert types(events).count("run_completed") == 1
    assert [m["message"]["content"][0]["data"]["text"] for m in of_type(events, "message_assistant")] == [
        "You said: hello"
    ]


async def test_a_server_tool_job_taken_and_never_begun_is_taken_again(api: Api, hung_tool: FirstCallHangs) -> None:
    agent = await api.agent(server_tools=["calculate"])
    session = await api.session(agent)
    await api.send(session, '/call calculate {"expression": "6*7"}')
    events = await api.wait_for(session, run_over, timeout=8)
    assert hung_tool.calls >= 2
    hung_tool.released.set()
    await asyncio.sleep(0.3)
    events = await api.events(session)
    results = of_type(events, "tool_result")
    assert len(results) == 1
    assert results[0]["is_error"] is False
    assert results[0]["content"][0]["data"]["text"] == "42"
    assert types(events).count("run_completed") == 1
