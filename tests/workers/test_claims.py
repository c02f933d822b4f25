"""A job a worker took but never began (the worker died, or hangs, in between) is taken again after one
lease, not after arq's job timeout: arq's claim on a job is a lease like the step's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from broker.services.runs import Runs
from broker.services.server_calls import ServerCalls
from switchboard.settings import Settings
from tests.api_client import Api, Event, Session, of_type, run_over, types


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # arq's own claim would hold a taken job for step_timeout_s + 10 s: far past what the test waits.
    return settings.model_copy(update={"step_timeout_s": 120.0})


class FirstCallHangs:
    """Wraps an async method so that its first call waits until `released`, as a worker that took a job
    and then stopped would; later calls pass straight through."""

    def __init__(self, method: Callable[..., Awaitable[Any]]) -> None:
        self._method = method
        self.released = asyncio.Event()
        self.first_returned = asyncio.Event()
        self.calls = 0

    def __get__(self, instance: object, owner: type) -> Callable[..., Awaitable[Any]]:
        async def bound(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls > 1:
                return await self._method(instance, *args, **kwargs)
            await self.released.wait()
            try:
                return await self._method(instance, *args, **kwargs)
            finally:
                self.first_returned.set()

        return bound


@pytest.fixture
def hang_first(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[type, str], FirstCallHangs]]:
    """`hang_first(cls, name)`: the first call of `cls.name` hangs until released (at the latest when the
    test ends: a worker waiting in it would hold the teardown, whose drain waits for its jobs)."""
    hangs: list[FirstCallHangs] = []

    def patch(owner: type, name: str) -> FirstCallHangs:
        hangs.append(FirstCallHangs(getattr(owner, name)))
        monkeypatch.setattr(owner, name, hangs[-1])
        return hangs[-1]

    yield patch
    for hang in hangs:
        hang.released.set()


async def run_past_a_hung_take(api: Api, session: Session, text: str, hang: FirstCallHangs) -> list[Event]:
    """Send `text` and wait for its run to end while the first take of its job hangs; then let that first
    taker go on, late, and return the log once it is done."""
    await api.send(session, text)
    await api.wait_for(session, run_over, timeout=8)
    assert hang.calls >= 2
    hang.released.set()
    await asyncio.wait_for(hang.first_returned.wait(), 5)
    return await api.events(session)


async def test_a_step_job_taken_and_never_begun_is_taken_again(
    api: Api, hang_first: Callable[[type, str], FirstCallHangs]
) -> None:
    session = await api.session()
    events = await run_past_a_hung_take(api, session, "hello", hang_first(Runs, "begin"))
    # The late taker found the step no longer its to begin: it changed nothing.
    assert types(events).count("run_started") == 1
    assert types(events).count("run_completed") == 1
    assert [m["message"]["content"][0]["data"]["text"] for m in of_type(events, "message_assistant")] == [
        "You said: hello"
    ]


async def test_a_server_tool_job_taken_and_never_begun_is_taken_again(
    api: Api, hang_first: Callable[[type, str], FirstCallHangs]
) -> None:
    session = await api.session(await api.agent(server_tools=["calculate"]))
    text = '/call calculate {"expression": "6*7"}'
    events = await run_past_a_hung_take(api, session, text, hang_first(ServerCalls, "begin"))
    results = of_type(events, "tool_result")
    assert len(results) == 1
    assert results[0]["is_error"] is False
    assert results[0]["content"][0]["data"]["text"] == "42"
    assert types(events).count("run_completed") == 1
