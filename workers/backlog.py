"""Timers before work: while a burst of partitions due together (more than one pipeline's worth, see
workers/keeper.py) wait for their visit or are being visited, the worker takes no new work.

A schedule's firing is the input that starts a run, and the run's steps follow it: when thousands of
schedules come due at one instant ("0 9 * * *" for every user), the steps of the runs fired first would
otherwise compete with the firings still owed (for the event loop, the Redis pool and Redis itself),
and the last firing would wait for thousands of steps. The steps lose nothing by waiting: the firings
are what they wait for. A few partitions due together hold nothing back (a held runner takes its work in
a lump afterwards, which would slow the firings of schedules spread over a minute), and a hold is
bounded (`HOLD_S`), so a worker whose timers never let up still takes work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

# The longest the runner waits for the timers before taking work anyway.
HOLD_S = 2.0


class Backlog:
    """Counts the bursts of visits owed (due together, waiting for their turn or under way); `cleared`
    waits until there are none, at most HOLD_S."""

    def __init__(self) -> None:
        self._owed = 0
        self._clear = asyncio.Event()
        self._clear.set()

    @property
    def owed(self) -> int:
        return self._owed

    @contextlib.contextmanager
    def owing(self) -> Iterator[None]:
        """Counted while the block runs."""
        self._owed += 1
        self._clear.clear()
        try:
            yield
        finally:
            self._owed -= 1
            if not self._owed:
                self._clear.set()

    async def cleared(self) -> None:
        if self._owed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._clear.wait(), HOLD_S)
