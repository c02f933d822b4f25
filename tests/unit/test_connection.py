"""The API's HTTP connection (`api.connection`) against the installed uvicorn: it hands uvicorn's protocol
everything unchanged, the hub's chunks land on the wire between the response's own as uvicorn frames
them, they stop where uvicorn's `send` would wait and after the client left, the request headers have a
deadline, and nothing of ours reaches into uvicorn's protocol modules or private names."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

import pytest
import uvicorn
from starlette.types import Message, Receive, Scope, Send

from api.connection import HttpConnection, chunk, chunk_writer, connection_protocol, uvicorn_protocol
from tests.stack import serve_asgi

ROOT = Path(__file__).resolve().parents[2]
GET = {"type": "http", "http_version": "1.1", "method": "GET"}
Handler = Callable[[Scope, Receive, Send], Any]


class Recorder(asyncio.Protocol):
    """Stands in for uvicorn's protocol: what it was built with and every call it got."""

    last: Recorder | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        Recorder.last = self
        self.built = (args, kwargs)
        self.calls: list[tuple[str, object]] = []
        self.writer_seen: Callable[[bytes], bool] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.calls.append(("connection_made", transport))

    def data_received(self, data: bytes) -> None:
        self.calls.append(("data_received", data))
        # What a request task uvicorn starts here would find.
        self.writer_seen = chunk_writer(GET)

    def eof_received(self) -> bool | None:
        self.calls.append(("eof_received", None))
        return True

    def pause_writing(self) -> None:
        self.calls.append(("pause_writing", None))

    def resume_writing(self) -> None:
        self.calls.append(("resume_writing", None))

    def connection_lost(self, exc: Exception | None) -> None:
        self.calls.append(("connection_lost", exc))


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview[int]) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def recording(header_timeout_s: float = 10.0) -> tuple[HttpConnection, Recorder, Transport]:
    protocol = type("Recording", (HttpConnection,), {"inner": Recorder, "header_timeout_s": header_timeout_s})
    connection = cast(HttpConnection, protocol("config", server_state="state"))
    inner = Recorder.last
    assert inner is not None
    transport = Transport()
    connection.connection_made(transport)
    return connection, inner, transport


async def test_uvicorns_protocol_gets_every_call_as_it_was_made() -> None:
    connection, inner, transport = recording()
    assert inner.built == (("config",), {"server_state": "state"})
    connection.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert connection.eof_received() is True
    connection.pause_writing()
    connection.resume_writing()
    error = ConnectionResetError()
    connection.connection_lost(error)
    assert inner.calls == [
        ("connection_made", transport),
        ("data_received", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("eof_received", None),
        ("pause_writing", None),
        ("resume_writing", None),
        ("connection_lost", error),
    ]


async def test_what_uvicorn_starts_while_handed_the_bytes_finds_the_connection_and_nothing_else_does() -> None:
    connection, inner, transport = recording()
    connection.data_received(b"GET / HTTP/1.1\r\n")
    assert inner.writer_seen is not None
    assert chunk_writer(GET) is None
    # Neither a HEAD nor an HTTP/1.0 request has a chunked answer to write into.
    for scope in ({**GET, "method": "HEAD"}, {**GET, "http_version": "1.0"}):
        assert chunk_writer(scope) is None
    assert inner.writer_seen(chunk(b"x"))
    assert transport.written == [chunk(b"x")]


async def test_the_writer_writes_only_while_the_socket_takes_it() -> None:
    connection, _, transport = recording()
    assert connection.write(b"a")
    connection.pause_writing()
    assert not connection.write(b"b")
    connection.resume_writing()
    assert connection.write(b"c")
    transport.closed = True
    assert not connection.write(b"d")
    transport.closed = False
    connection.connection_lost(None)
    assert not connection.write(b"e")
    assert transport.written == [b"a", b"c"]


async def test_the_header_deadline_runs_until_the_headers_end_and_again_from_a_next_request() -> None:
    connection, _, transport = recording(header_timeout_s=0.05)
    connection.data_received(b"POST / HTTP/1.1\r\nHost: x\r\n")
    connection.data_received(b"Content-Length: 4\r\n\r\n")
    await asyncio.sleep(0.1)
    # The headers are in: a slow body is not under the deadline.
    assert not transport.closed
    connection.data_received(b"body")
    await asyncio.sleep(0.1)
    assert not transport.closed
    # The next request's first byte starts it again.
    connection.data_received(b"GET / HTTP/1.1\r\n")
    await asyncio.sleep(0.1)
    assert transport.closed


async def test_a_connection_that_sends_nothing_is_closed_at_the_deadline() -> None:
    _, _, transport = recording(header_timeout_s=0.05)
    await asyncio.sleep(0.1)
    assert transport.closed


def test_the_protocol_is_the_one_uvicorn_resolves_its_documented_names_to() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        del scope, receive, send

    for name in ("httptools", "h11", "auto"):
        config = uvicorn.Config(app, http=name, log_config=None, lifespan="off")
        config.load()
        assert uvicorn_protocol(name) is config.http_protocol_class
        assert connection_protocol(1.0, name).inner is config.http_protocol_class
    assert connection_protocol(2.5).header_timeout_s == 2.5


@contextlib.asynccontextmanager
async def served(handler: Handler, http: str) -> AsyncIterator[tuple[str, int]]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"].removeprefix("lifespan.")
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        await handler(scope, receive, send)

    async with serve_asgi(app, http=connection_protocol(10.0, http)) as url:
        host, port = url.removeprefix("http://").split(":")
        yield host, int(port)


def body(text: bytes, more: bool = True) -> Message:
    return {"type": "http.response.body", "body": text, "more_body": more}


HEAD: Message = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_the_hubs_chunks_land_between_the_responses_own_as_uvicorn_frames_them(http: str) -> None:
    async def handler(scope: Scope, receive: Receive, send: Send) -> None:
        await send(HEAD)
        write = chunk_writer(scope)
        assert write is not None
        await send(body(b"one"))
        assert write(chunk(b"two"))
        await send(body(b"three"))
        assert write(chunk(b"four"))
        await send(body(b"", more=False))

    async with served(handler, http) as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    head, _, sent = answer.partition(b"\r\n\r\n")
    assert b"\r\ntransfer-encoding: chunked" in head.lower()
    assert sent == b"".join(chunk(part) for part in (b"one", b"two", b"three", b"four")) + b"0\r\n\r\n"


async def test_the_writer_stops_where_send_would_wait_and_takes_up_again_once_the_reader_reads() -> None:
    block = b"x" * 16_384
    reading = asyncio.Event()
    outcome: dict[str, object] = {}

    async def handler(scope: Scope, receive: Receive, send: Send) -> None:
        await send(HEAD)
        write = chunk_writer(scope)
        assert write is not None
        written = 0
        # A reader that does not read: the kernel's buffers, then the transport's, fill up.
        while written < 4_096 and write(chunk(block)):
            written += 1
        outcome["written"] = written
        try:
            await asyncio.wait_for(send(body(block)), 0.3)
            outcome["send_waited"] = False
        except TimeoutError:
            outcome["send_waited"] = True
        reading.set()
        for _ in range(1_000):
            if write(chunk(b"again")):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the writer never took up again")
        await send(body(b"", more=False))

    async with served(handler, "httptools") as (host, port):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await asyncio.wait_for(reading.wait(), 30)
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
    written = cast(int, outcome["written"])
    assert 0 < written < 4_096
    assert outcome["send_waited"] is True
    _, _, sent = answer.partition(b"\r\n\r\n")
    assert sent == chunk(block) * written + chunk(b"again") + b"0\r\n\r\n"


async def test_nothing_is_written_once_the_client_has_gone() -> None:
    outcome: list[bool] = []

    async def handler(scope: Scope, receive: Receive, send: Send) -> None:
        await send(HEAD)
        write = chunk_writer(scope)
        assert write is not None
        while (await receive())["type"] != "http.disconnect":
            pass
        outcome.append(write(chunk(b"late")))

    async with served(handler, "httptools") as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.close()
        for _ in range(500):
            if outcome:
                break
            await asyncio.sleep(0.01)
    assert outcome == [False]


def uvicorn_imports(path: Path) -> set[str]:
    """The uvicorn modules and names `path` imports, dotted."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name == "uvicorn" or name.startswith("uvicorn.")}


def test_no_code_of_ours_imports_uvicorns_protocols_or_a_private_name() -> None:
    for package in ("api", "broker", "workers", "common", "switchboard", "delegate", "bench"):
        for path in (ROOT / package).rglob("*.py"):
            for name in uvicorn_imports(path):
                parts = name.split(".")
                assert parts[:2] != ["uvicorn", "protocols"], (path, name)
                assert not any(part.startswith("_") for part in parts), (path, name)


async def test_a_next_request_begun_before_the_last_ones_timer_ran_out_gets_its_own_full_deadline() -> None:
    connection, _, transport = recording(header_timeout_s=1.0)
    connection.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.sleep(0.6)
    connection.data_received(b"GET / HTTP/1.1\r\n")
    # The first request's timer has run out by now, and the second's headers have had 0.6 s of their 1.
    await asyncio.sleep(0.6)
    assert not transport.closed
    await asyncio.sleep(0.8)
    assert transport.closed
