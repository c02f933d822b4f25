"""Stopping background tasks: a task that loses its cancellation is cancelled again."""

from __future__ import annotations

import asyncio

from common.tasks import cancel_and_wait


async def test_a_task_that_swallows_its_cancellation_is_cancelled_again() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                # What a library that loses a cancellation does: the loop goes on.
                if swallowed:
                    raise
                swallowed += 1

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    async with asyncio.timeout(5):
        await cancel_and_wait([task])
    assert task.cancelled()
    assert swallowed == 1


async def test_ended_tasks_and_failures_are_waited_for_quietly() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    done = asyncio.create_task(asyncio.sleep(0))
    failed = asyncio.create_task(fails())
    await asyncio.sleep(0.01)
    await cancel_and_wait([done, failed])
    assert done.done()
    assert failed.done()
