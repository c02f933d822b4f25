"""A minimal keep-alive HTTP/1.1 client for the load the benchmarks generate.

httpx spends milliseconds of CPU per request once many wait on its pool, which made the load generator,
not the server, the bottleneck; this client costs a few tens of µs per request, so the figures measure
Switchboard. One connection carries one request at a time; a pool hands out idle connections.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer


class RawHttp:
    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._auth = f"Authorization: Bearer {token}\r\n"
        self._idle: list[_Connection] = []

    async def _connection(self) -> _Connection:
        if self._idle:
            return self._idle.pop()
        reader, writer = await asyncio.open_connection(self._host, self._port)
        return _Connection(reader, writer)

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        *,
        token: str | None = None,
    ) -> tuple[int, bytes]:
        """One request on an idle connection; `token` stands in for the client's own credential. A `bytes`
        body is sent as it is (JSON already), anything else as its JSON."""
        payload = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        kind = "Content-Type: application/json\r\n" if body is not None else ""
        auth = self._auth if token is None else f"Authorization: Bearer {token}\r\n"
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}\r\n{auth}{extra}{kind}"
            f"Content-Length: {len(payload)}\r\n\r\n"
        )
        message = head.encode() + payload
        connection = await self._connection()
        connection.writer.write(message)
        line = await connection.reader.readline()
        if not line:
            # An idle connection the server closed (uvicorn keeps one alive 5 s): once more, on a new one.
            connection.writer.close()
            reader, writer = await asyncio.open_connection(self._host, self._port)
            connection = _Connection(reader, writer)
            connection.writer.write(message)
            line = await connection.reader.readline()
        status = int(line.split(b" ", 2)[1])
        length = 0
        while (line := await connection.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        content = await connection.reader.readexactly(length) if length else b""
        self._idle.append(connection)
        return status, content

    def close(self) -> None:
        for connection in self._idle:
            connection.writer.close()
        self._idle.clear()
