"""The checking children of one process (`broker.schema.child`): started when first needed, one check
at a time each, killed when an answer is later than the budget's time allows (the next check gets a new
one). A step checks its calls one after another, so one session's step holds one child at a time; with
two, another session's check finds one free unless two slow steps run at once, and then waits a bounded
time, not charged to its own step."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

from common.codec import loads
from common.schema.frames import HEADER, frame

# A child not ready this long after it was started is taken for stuck.
_START_S = 30.0


class Late(Exception):
    """No answer in time: the child was stuck (it is killed), or none came free."""


class Gone(Exception):
    """The child stopped before it answered."""


class Child:
    """One checking process."""

    def __init__(self, steps: int, seconds: float) -> None:
        self._argv = [sys.executable, "-m", "common.schema.child", str(steps), str(seconds)]
        self._process: asyncio.subprocess.Process | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def ask(self, schema_text: str, arguments: Any, answer_s: float) -> dict[str, Any]:
        """The child's answer, which it has `answer_s` to give; Late (it is killed) or Gone."""
        request = frame({"schema": schema_text, "arguments": arguments})
        try:
            process = await self.ready()
            assert process.stdin is not None
            process.stdin.write(request)
            await process.stdin.drain()
            async with asyncio.timeout(answer_s):
                return await _read(process)
        except TimeoutError:
            await self.stop()
            raise Late from None
        except (asyncio.IncompleteReadError, ConnectionError):
            await self.stop()
            raise Gone from None
        except BaseException:
            # Cancelled mid-exchange: what the child would answer next is unknown.
            await self.stop()
            raise

    async def ready(self) -> asyncio.subprocess.Process:
        """The running process, started (and waited for until it says it is ready) if need be."""
        if self._process is None or self._process.returncode is not None:
            self._process = await asyncio.create_subprocess_exec(
                *self._argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
            )
            # Imports take a while on a busy machine: the answer's clock starts once the child is ready.
            async with asyncio.timeout(_START_S):
                await _read(self._process)
        return self._process

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()


class Children:
    """`count` children, each answering one check at a time."""

    def __init__(self, steps: int, seconds: float, count: int = 2) -> None:
        self._all = [Child(steps, seconds) for _ in range(count)]
        self._free: asyncio.Queue[Child] = asyncio.Queue()
        for child in self._all:
            self._free.put_nowait(child)

    @property
    def running(self) -> int:
        """How many children are running now."""
        return sum(child.running for child in self._all)

    @contextlib.asynccontextmanager
    async def free(self, wait_s: float) -> AsyncIterator[Child]:
        """A child no other check is using, for one check; Late when none came free within `wait_s`."""
        try:
            async with asyncio.timeout(wait_s):
                child = await self._free.get()
        except TimeoutError:
            raise Late from None
        try:
            yield child
        finally:
            self._free.put_nowait(child)

    async def close(self) -> None:
        for child in self._all:
            await child.stop()


async def _read(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdout is not None
    header = await process.stdout.readexactly(HEADER.size)
    answer: dict[str, Any] = loads(await process.stdout.readexactly(HEADER.unpack(header)[0]))
    return answer
