"""Timers before work: the runner takes no new work while the keeper owes visits, and not for long."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from broker import Broker
from workers import backlog as backlog_module
from workers.backlog import Backlog
from workers.runner import Runner


class _Work:
    def __init__(self) -> None:
        self.taken: list[float] = []

    async def take(self, partition: int, consumer: str, room: int) -> list[Any]:
        self.taken.append(asyncio.get_running_loop().time())
        return []


class _Broker:
    def __init__(self) -> None:
        self.work = _Work()

    def node_of(self, partition: int) -> str:
        return ""


async def _nothing(_: Any) -> None:
    return None


@contextlib.asynccontextmanager
async def running(backlog: Backlog) -> AsyncIterator[tuple[_Broker, Runner]]:
    """A runner taking work from a fake broker, held back by `backlog`; both."""
    broker = _Broker()
    runner = Runner(cast(Broker, broker), "w", _nothing, max_jobs=10, backlog=backlog)
    runner.start()
    try:
        yield broker, runner
    finally:
        await runner.drain(1)


async def test_work_waits_for_the_visits_owed_and_goes_once_they_are_done() -> None:
    backlog = Backlog()
    async with running(backlog) as (broker, runner):
        with backlog.owing():
            runner.wake(1)
            await asyncio.sleep(0.2)
            assert broker.work.taken == []
            assert backlog.owed == 1
        released = asyncio.get_running_loop().time()
        async with asyncio.timeout(1):
            while not broker.work.taken:
                await asyncio.sleep(0.01)
        assert broker.work.taken[0] >= released


async def test_a_backlog_that_never_clears_holds_work_back_for_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backlog_module, "HOLD_S", 0.2)
    backlog = Backlog()
    async with running(backlog) as (broker, runner):
        with backlog.owing():
            runner.wake(1)
            async with asyncio.timeout(2):
                while not broker.work.taken:
                    await asyncio.sleep(0.01)
