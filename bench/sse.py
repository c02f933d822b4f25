"""A minimal SSE reader over a raw socket: light enough to hold thousands of streams in one process."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Received:
    at: float
    event: dict[str, Any]


class RawStream:
    """One `GET .../events/stream`, its chunked body split into SSE frames as they arrive."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._buffer = b""

    @classmethod
    async def open(cls, url: str, session_id: str, token: str, query: str = "") -> RawStream:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port, limit=2**20)
        path = f"/v1/sessions/{session_id}/events/stream{query}"
        request = f"GET {path} HTTP/1.1\r\nHost: {parts.hostname}\r\nAuthorization: Bearer {token}\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"stream refused: {status!r}")
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        return cls(reader, writer)

    async def frames(self) -> AsyncIterator[tuple[float, bytes]]:
        """(receive time, frame) for each frame, in order."""
        while True:
            size_line = await self._reader.readline()
            if not size_line:
                return
            size = int(size_line.strip(), 16)
            chunk = await self._reader.readexactly(size + 2)
            at = time.time()
            self._buffer += chunk[:-2]
            while b"\n\n" in self._buffer:
                frame, self._buffer = self._buffer.split(b"\n\n", 1)
                yield at, frame

    async def events(self, wait_s: float | None = None) -> AsyncIterator[Received]:
        """Each event, in order. With `wait_s`, a reader left waiting that long for the next event (keepalive
        frames do not count) raises TimeoutError: a step that never comes fails its scenario, not hangs it."""
        frames = self.frames()
        loop = asyncio.get_running_loop()
        while True:
            try:
                async with asyncio.timeout_at(None if wait_s is None else loop.time() + wait_s):
                    found = await _next_data(frames)
            except TimeoutError:
                raise TimeoutError(f"no event on the stream for {wait_s:g} s") from None
            if found is None:
                return
            at, data = found
            for payload in data:
                yield Received(at, json.loads(payload))

    def close(self) -> None:
        self._writer.close()


async def _next_data(frames: AsyncIterator[tuple[float, bytes]]) -> tuple[float, list[bytes]] | None:
    """The next frame that carries data: its receive time and data lines; None when the stream ends."""
    async for at, frame in frames:
        data = [line[6:] for line in frame.split(b"\n") if line.startswith(b"data: ")]
        if data:
            return at, data
    return None
