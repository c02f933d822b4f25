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

    async def events(self) -> AsyncIterator[Received]:
        async for at, frame in self.frames():
            for line in frame.split(b"\n"):
                if line.startswith(b"data: "):
                    yield Received(at, json.loads(line[6:]))

    def close(self) -> None:
        self._writer.close()
