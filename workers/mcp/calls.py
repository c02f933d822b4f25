"""Calls of agents' MCP servers, run beside the worker's jobs rather than in one of its slots.

A slow or silent server would otherwise hold a job slot for each of its calls, up to `timeout_s` (an
hour at most), and the slots are what every other session's steps need. So a call, once begun (its work
entry done with, the call under its renewed lease, which a crash leaves to lapse as before), runs as a
task here: at most `SWITCHBOARD_MCP_CALLS_PER_GRANT` at once per server, the others waiting for a turn
within their own `timeout_s`, holding nothing but their task; at most `SWITCHBOARD_MCP_CALLS_PER_WORKER`
in all, past which a call is refused at once (its result says so) rather than queued without bound."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

from common.tasks import cancel_and_wait
from workers.metrics import WorkerMetrics

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Server:
    turns: asyncio.Semaphore
    # Calls holding or awaiting a turn: the server is forgotten when none is left.
    users: int = 0


class McpCalls:
    def __init__(self, per_grant: int, per_worker: int, metrics: WorkerMetrics | None = None) -> None:
        self.per_grant = per_grant
        self.per_worker = per_worker
        self._metrics = metrics
        self._tasks: set[asyncio.Task[None]] = set()
        self._servers: dict[str, _Server] = {}
        self._running = 0
        self._waiting = 0

    @property
    def full(self) -> bool:
        """Whether a call begun now would pass `per_worker`."""
        return len(self._tasks) >= self.per_worker

    def refused(self) -> None:
        if self._metrics is not None:
            self._metrics.mcp_calls_refused.inc()

    def start(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run `work` beside the jobs (the caller checked `full`)."""
        task = asyncio.create_task(self._guarded(work), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _guarded(work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            # The call keeps its lease until it lapses, and then fails as interrupted.
            logger.exception("an MCP call failed")

    def _count(self) -> None:
        if self._metrics is not None:
            self._metrics.mcp_calls.labels("running").set(self._running)
            self._metrics.mcp_calls.labels("waiting").set(self._waiting)

    @contextlib.asynccontextmanager
    async def turn(self, key: str, deadline: float) -> AsyncIterator[bool]:
        """A turn at the server `key` (False: none came before `deadline`, loop time); held for the block."""
        server = self._servers.get(key)
        if server is None:
            server = self._servers[key] = _Server(asyncio.Semaphore(self.per_grant))
        server.users += 1
        self._waiting += 1
        self._count()
        got = False
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    await server.turns.acquire()
                    got = True
            except TimeoutError:
                pass
            finally:
                self._waiting -= 1
                self._running += got
                self._count()
            try:
                yield got
            finally:
                if got:
                    server.turns.release()
                    self._running -= 1
                    self._count()
        finally:
            server.users -= 1
            if server.users == 0:
                del self._servers[key]

    async def drain(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the calls running to end; the rest are cancelled (their leases lapse)."""
        if self._tasks:
            _, left = await asyncio.wait(set(self._tasks), timeout=timeout_s)
            await cancel_and_wait(left)
