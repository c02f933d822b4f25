"""Group commit for the hot routes: calls of one partition that arrive while another of its calls is in
flight go to Redis together, as one FCALL of the library's batch function.

Each Redis command costs its server a read, a parse, a dispatch and a write whatever it does, and a
script call a fixed amount more to set up; at 100 calls in flight those were a third of an ack's cost.
A partition has at most one batch in flight per process: a call that finds none goes at once, alone
(no added wait at low load); calls that arrive meanwhile wait for it and then go together. Each call in
a batch runs as it would alone, atomically, in arrival order, and gets its own answer or error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

# The most calls in one batch: one FCALL runs them all, and Redis serves nothing else meanwhile.
BATCH_LIMIT = 64

Head = tuple[str, str]
Send = Callable[[Head, list[str], Sequence[str | int | bytes]], Awaitable[Any]]


@dataclass(slots=True)
class _Call:
    name: str
    keys: list[str]
    shared: list[str]
    args: Sequence[str | int | bytes]
    answer: asyncio.Future[Any]


def batch_layout(
    calls: Sequence[tuple[str, list[str], Sequence[str | int | bytes]]], shared: list[str]
) -> tuple[list[str], list[str | int | bytes]]:
    """The keys and arguments of the batch function (lib/batch.lua) running `calls` (each a script's name,
    its own keys and its arguments), all ending with the keys `shared`."""
    keys: list[str] = list(shared)
    args: list[str | int | bytes] = [len(calls), len(shared)]
    for name, call_keys, call_args in calls:
        keys += call_keys
        args += [name, len(call_keys), len(call_args), *call_args]
    return keys, args


class Batcher:
    """Sends the calls of each partition one batch at a time. `send(head, keys, args)` runs one FCALL
    (`head` is ("FCALL", function)); `single` names each script's own function, `batch` the batch's."""

    def __init__(self, send: Send, single: dict[str, str], batch: str, limit: int = BATCH_LIMIT) -> None:
        self._send = send
        self._single = single
        self._batch = batch
        self._limit = limit
        # A partition with a call or batch in flight, and the calls waiting for it to come back.
        self._waiting: dict[int, list[_Call]] = {}
        # The event loop holds only weak references to tasks.
        self._draining: set[asyncio.Task[None]] = set()

    async def run(
        self, partition: int, name: str, keys: list[str], shared: list[str], args: Sequence[str | int | bytes]
    ) -> Any:
        """The script's reply, as if it had been sent alone with `keys` then `shared` (the keys every call
        of the partition ends with, sent once per batch)."""
        waiting = self._waiting.get(partition)
        if waiting is None:
            # Nothing of this partition in flight: this call goes now, from its own task. What arrives
            # meanwhile waits for it, then goes in batches.
            self._waiting[partition] = []
            try:
                return await self._alone(name, keys, shared, args)
            finally:
                self._after(partition)
        call = _Call(name, keys, shared, args, asyncio.get_running_loop().create_future())
        waiting.append(call)
        return await call.answer

    async def together(
        self, name: str, calls: Sequence[tuple[list[str], Sequence[str | int | bytes]]], shared: list[str]
    ) -> list[Any]:
        """Calls of one partition known all at once (its due schedules): sent in batches of at most the
        limit from the first, rather than the first alone and the rest after it; one reply or error per
        call, in order. They do not wait for the partition's calls `run` has in flight (ordering among
        them is no more than it is across processes)."""
        loop = asyncio.get_running_loop()
        pending = [_Call(name, keys, shared, args, loop.create_future()) for keys, args in calls]
        for start in range(0, len(pending), self._limit):
            await self._one(pending[start : start + self._limit])
        return list(await asyncio.gather(*(call.answer for call in pending), return_exceptions=True))

    async def _alone(self, name: str, keys: list[str], shared: list[str], args: Sequence[str | int | bytes]) -> Any:
        return await self._send(("FCALL", self._single[name]), [*keys, *shared], args)

    def _after(self, partition: int) -> None:
        waiting = self._waiting[partition]
        # A caller gone before its call was sent (its request cancelled): the call is not sent.
        waiting[:] = [call for call in waiting if not call.answer.done()]
        if waiting:
            task = asyncio.create_task(self._drain(partition, waiting))
            self._draining.add(task)
            task.add_done_callback(self._draining.discard)
        else:
            del self._waiting[partition]

    async def _drain(self, partition: int, waiting: list[_Call]) -> None:
        batch = waiting[: self._limit]
        del waiting[: self._limit]
        try:
            await self._one(batch)
        finally:
            self._after(partition)

    async def _one(self, batch: list[_Call]) -> None:
        try:
            if len(batch) == 1:
                (call,) = batch
                replies = [await self._alone(call.name, call.keys, call.shared, call.args)]
            else:
                keys, args = batch_layout([(call.name, call.keys, call.args) for call in batch], batch[0].shared)
                replies = await self._send(("FCALL", self._batch), keys, args)
        except BaseException as error:
            for call in batch:
                if not call.answer.done():
                    call.answer.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        for call, reply in zip(batch, replies, strict=True):
            if call.answer.done():
                continue
            if isinstance(reply, ResponseError):
                call.answer.set_exception(reply)
            else:
                call.answer.set_result(reply)
