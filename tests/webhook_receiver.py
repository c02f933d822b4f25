"""A webhook receiver for the tests: a small HTTP server (uvicorn, in the test's loop) recording what each
path is sent, answering as the test says."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from starlette.types import Receive, Scope, Send

from tests.stack import serve_asgi


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    # Held this long before answering (a slow endpoint).
    delay_s: float = 0.0


class Receiver:
    """`url(path)` to send to; `answers[path]` the answers to give in turn (the last one repeats)."""

    def __init__(self) -> None:
        self.base = ""
        self.received: dict[str, list[Received]] = defaultdict(list)
        # Every request as it arrives, before it is held (`delay_s`) or answered: what a sender whose
        # answer never came (it was killed meanwhile) sent.
        self.arrived: dict[str, list[Received]] = defaultdict(list)
        self.answers: dict[str, list[Answer]] = {}
        self._arrived = asyncio.Condition()

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    async def wait(self, path: str, count: int = 1, timeout: float = 10.0, *, answered: bool = True) -> list[Received]:
        """The first `count` requests to `path`, once they came (and were answered, unless `answered` is
        False: then as they arrived)."""
        seen = self.received if answered else self.arrived
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(seen[path]) >= count)
        return seen[path][:count]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                # The sender went before its body came whole (killed mid-request): nothing was delivered.
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"]
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        queued = self.answers.get(path) or [Answer()]
        answer = queued.pop(0) if len(queued) > 1 else queued[0]
        async with self._arrived:
            self.arrived[path].append(Received(path, headers, body, time.monotonic()))
            self._arrived.notify_all()
        if answer.delay_s:
            await asyncio.sleep(answer.delay_s)
        async with self._arrived:
            self.received[path].append(Received(path, headers, body, time.monotonic()))
            self._arrived.notify_all()
        await send(
            {
                "type": "http.response.start",
                "status": answer.status,
                "headers": [(k.encode(), v.encode()) for k, v in answer.headers.items()],
            }
        )
        await send({"type": "http.response.body", "body": b"ok"})


@contextlib.asynccontextmanager
async def receiving() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    async with serve_asgi(receiver) as url:
        receiver.base = url
        yield receiver
