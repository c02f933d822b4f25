"""What a model streams (text, reasoning, tool-call arguments), published live (not logged) for readers that ask
for it with `?include=deltas`."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from broker import Broker
from common.codec import dumps

# Deltas go out at most this often: a token per publish would cost Redis more than readers gain.
FLUSH_EVERY_S = 0.05
# ...unless this many characters are waiting: then they go at once (after a publish in flight), so a
# server that streams faster than the ticks costs the worker and Redis messages of about this size, not
# one of everything it sent in between (what a step may stream at all is bounded before it gets here:
# workers/models/bounds.py).
FLUSH_AT_CHARS = 262_144

# A text piece has no call; a tool-input piece names its call: (index, call_id, name); a reasoning piece
# is marked by _REASONING.
_Call = tuple[int, str, str]
_REASONING: _Call = (-1, "", "")


class DeltaStream:
    """The step's DeltaSink: pieces are buffered in arrival order and go out every FLUSH_EVERY_S (or at
    once past FLUSH_AT_CHARS), runs of pieces of one kind (text, or one call's arguments) joined into
    frames of at most FLUSH_AT_CHARS characters."""

    def __init__(self, broker: Broker, session_id: str, run_id: str, step: int) -> None:
        self._broker = broker
        self._session_id = session_id
        self._run_id = run_id
        self._step = step
        self._runs: list[tuple[_Call | None, list[str]]] = []
        # Characters in _runs.
        self._pending = 0
        self._reset = False
        self._task: asyncio.Task[None] | None = None
        # The flush task is still sleeping (not yet publishing): only then may close() cancel it.
        self._waiting = False

    def text(self, piece: str) -> None:
        self._add(None, piece)

    def reasoning(self, piece: str) -> None:
        self._add(_REASONING, piece)

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        self._add((index, call_id, name), piece)

    def restart(self) -> None:
        self._runs.clear()
        self._pending = 0
        self._reset = True
        self._schedule()

    def _add(self, call: _Call | None, piece: str) -> None:
        if not piece:
            return
        if self._runs and self._runs[-1][0] == call:
            self._runs[-1][1].append(piece)
        else:
            self._runs.append((call, [piece]))
        self._pending += len(piece)
        if self._pending >= FLUSH_AT_CHARS:
            self._flush_now()
        else:
            self._schedule()

    def _schedule(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._flush_soon())

    def _flush_now(self) -> None:
        task = self._task
        if task is not None and not task.done():
            if not self._waiting:
                # A publish is in flight: frames go out in order, so these wait for it (the next piece
                # after it starts their flush).
                return
            task.cancel()
        self._task = asyncio.create_task(self.flush())

    async def _flush_soon(self) -> None:
        self._waiting = True
        try:
            await asyncio.sleep(FLUSH_EVERY_S)
        finally:
            self._waiting = False
        await self.flush()

    def _frames(self, call: _Call | None, pieces: list[str]) -> list[dict[str, Any]]:
        """A run's frames: its text joined, in frames of at most FLUSH_AT_CHARS characters each."""
        text = "".join(pieces)
        parts = [text[start : start + FLUSH_AT_CHARS] for start in range(0, len(text), FLUSH_AT_CHARS)] or [""]
        return [self._frame(call, part) for part in parts]

    def _frame(self, call: _Call | None, delta: str) -> dict[str, Any]:
        head: dict[str, Any] = {"run_id": self._run_id, "step": self._step}
        if call is None:
            return {"type": "message_delta", **head, "delta": delta}
        if call is _REASONING:
            # An extension frame: what the model reasons, as it streams (when the provider shows it).
            return {"type": "thinking_delta", **head, "delta": delta}
        index, call_id, name = call
        return {"type": "tool_call_delta", **head, "call_id": call_id, "index": index, "name": name,
                "delta": delta}  # fmt: skip

    async def flush(self) -> None:
        if not self._runs and not self._reset:
            return
        frames = [frame for call, pieces in self._runs for frame in self._frames(call, pieces)]
        if self._reset:
            # One `reset` voids every delta of the step so far, text and tool input alike.
            if frames and frames[0]["type"] == "message_delta":
                frames[0]["reset"] = True
            else:
                frames.insert(0, {**self._frame(None, ""), "reset": True})
        self._runs = []
        self._pending = 0
        self._reset = False
        # Best effort: a lost delta costs a reader nothing it will not get in the full message.
        with contextlib.suppress(Exception):
            await self._broker.log.publish_extra(self._session_id, [dumps(frame) for frame in frames])

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
