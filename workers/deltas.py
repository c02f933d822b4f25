"""Streamed text, published live (not logged) for readers that ask for it with `?include=deltas`."""

from __future__ import annotations

import asyncio
import contextlib

from broker import Broker
from broker.codec import dumps

# Deltas go out at most this often: a token per publish would cost Redis more than readers gain.
FLUSH_EVERY_S = 0.05


class DeltaStream:
    def __init__(self, broker: Broker, session_id: str, run_id: str, step: int) -> None:
        self._broker = broker
        self._session_id = session_id
        self._head = {"type": "message_delta", "run_id": run_id, "step": step}
        self._buffer: list[str] = []
        self._reset = False
        self._task: asyncio.Task[None] | None = None
        # The flush task is still sleeping (not yet publishing): only then may close() cancel it.
        self._waiting = False

    def sink(self, piece: str | None) -> None:
        if piece is None:
            self._buffer.clear()
            self._reset = True
        else:
            self._buffer.append(piece)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        self._waiting = True
        try:
            await asyncio.sleep(FLUSH_EVERY_S)
        finally:
            self._waiting = False
        await self.flush()

    async def flush(self) -> None:
        if not self._buffer and not self._reset:
            return
        payload = {**self._head, "delta": "".join(self._buffer)}
        if self._reset:
            payload["reset"] = True
        self._buffer.clear()
        self._reset = False
        # Best effort: a lost delta costs a reader nothing it will not get in the full message.
        with contextlib.suppress(Exception):
            await self._broker.log.publish_extra(self._session_id, dumps(payload))

    async def close(self) -> None:
        task = self._task
        if task is not None and not task.done():
            # A flush already publishing is waited for, not cancelled: it took the buffer, and a publish
            # cut off half-way would lose that text for live readers (a busy machine saw none at all).
            if self._waiting:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.flush()
