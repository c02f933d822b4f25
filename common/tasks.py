"""Stopping background tasks for certain."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

# How long a cancelled task may take to end before it is asked again.
_RETRY_S = 1.0


async def cancel_and_wait(tasks: Iterable[asyncio.Task[object]]) -> None:
    """Cancel `tasks` and wait until every one has ended.

    A cancellation can be lost on its way through awaited library code (seen in the tests under load: a
    keeper's beat task marked cancelling, back asleep in its loop, and a worker's stop waiting on it for
    ever), so a task still running a second after its cancel is cancelled again."""
    tasks = list(tasks)
    pending = {task for task in tasks if not task.done()}
    for task in pending:
        task.cancel()
    while pending:
        _, pending = await asyncio.wait(pending, timeout=_RETRY_S)
        for task in pending:
            task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            task.exception()
