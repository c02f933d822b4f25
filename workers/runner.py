"""Takes work from the partitions this worker keeps and runs it, at most `SWITCHBOARD_WORKER_MAX_JOBS`
at once.

`wake(partition)` marks a partition as having new work (its alarm channel said `w`, or it was just taken
over or rescanned); the loop takes entries from marked partitions while it has room, and a partition
stays marked while a take fills the room it was offered. A full worker takes nothing: the entries wait
in the stream, where this worker takes them as its jobs end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from broker import Broker
from broker.services.work import Entry
from common.tasks import cancel_and_wait
from workers.backlog import Backlog
from workers.backoff import Backoff

logger = logging.getLogger(__name__)


class Runner:
    def __init__(
        self,
        broker: Broker,
        consumer: str,
        execute: Callable[[Entry], Awaitable[None]],
        *,
        max_jobs: int,
        backlog: Backlog | None = None,
    ) -> None:
        self._broker = broker
        self._consumer = consumer
        self._execute = execute
        self._max_jobs = max_jobs
        self._marked: set[int] = set()
        self._changed = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._taking = True
        self._loop: asyncio.Task[None] | None = None
        # Partitions whose node failed a take are marked again after a backoff.
        self._backoff = Backoff("taking work")
        # Due timers go first: a take waits for the keeper's visits (workers/backlog.py).
        self._backlog = backlog or Backlog()

    @property
    def running(self) -> int:
        return len(self._running)

    def start(self) -> None:
        self._loop = asyncio.create_task(self._take_forever(), name="runner")

    def wake(self, partition: int) -> None:
        self._marked.add(partition)
        self._changed.set()

    def run(self, entry: Entry) -> None:
        """Run an entry this worker holds already (taken over from a dead worker), room or not."""
        task = asyncio.create_task(self._execute_one(entry), name=f"work-{entry.entry_id}")
        self._running.add(task)
        task.add_done_callback(self._ended)

    async def drain(self, timeout_s: float) -> None:
        """Take no more work, and wait up to `timeout_s` for what runs to end (what is left is cancelled:
        its leases lapse and other workers take it over)."""
        self._taking = False
        if self._loop is not None:
            await cancel_and_wait([self._loop])
        if self._running:
            _, left = await asyncio.wait(set(self._running), timeout=timeout_s)
            await cancel_and_wait(left)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._changed.set()

    async def _execute_one(self, entry: Entry) -> None:
        try:
            await self._execute(entry)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The entry keeps its claim (or its step or call keeps its lease): another try comes after it.
            logger.exception("work entry %s (%s) failed", entry.entry_id, entry.kind)

    async def _take_forever(self) -> None:
        work = self._broker.work
        while self._taking:
            await self._backlog.cleared()
            room = self._max_jobs - len(self._running)
            if not self._marked or room <= 0:
                self._changed.clear()
                await self._changed.wait()
                continue
            partition = self._marked.pop()
            node = self._broker.node_of(partition)
            wait_s = self._backoff.wait_s(node, partition)
            if wait_s > 0:
                asyncio.get_running_loop().call_later(wait_s, self.wake, partition)
                continue
            try:
                entries = await work.take(partition, self._consumer, room)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                # Its node did not answer: the others' work goes on; this one is asked again later.
                delay_s = self._backoff.failed(node, partition, error)
                asyncio.get_running_loop().call_later(delay_s, self.wake, partition)
                continue
            self._backoff.succeeded(node, partition)
            if len(entries) == room:
                self._marked.add(partition)
            for entry in entries:
                self.run(entry)
