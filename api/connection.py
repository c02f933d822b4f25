"""An HTTP connection as the API serves it: uvicorn's own HTTP/1.1 protocol, wrapped by one of ours that
sits between the socket's transport and uvicorn's protocol and adds two things uvicorn does not have.

- A deadline on request headers (`SWITCHBOARD_HEADER_TIMEOUT_S`). uvicorn's keep-alive timeout runs only
  between requests and is cancelled by the first byte of the next one, so a client that sends a header
  line every few seconds holds its connection (and its memory) for as long as it likes, and a few hundred
  such clients hold a process's connections. The deadline runs from the moment the connection opens (for
  its first request) or from the first byte of each later request, and ends when the request's headers
  have arrived; a body, a response and an event stream that runs for hours are not under it. Where each
  request begins and where its headers end is read by an HTTP parser of our own fed the same bytes.
- Chunks written from outside a response's task (`chunk_writer`). The live hub hands each published
  message to every waiting event stream in one pass (`api.sse.LiveCursor`): with thousands of streams,
  waking each stream's task to write through the server's `send` instead more than doubles the API's CPU
  per event and stream (docs/performance.md). A write is made only when `send` would write at once: not
  while the socket's buffer is past its high-water mark, and not once the connection is closing or gone;
  otherwise nothing is written and the stream's task goes the ordinary way, through `send`.

Only public interfaces are used, each for what it is documented to do:

- uvicorn's `http=` setting, which takes an `asyncio.Protocol` class and builds one per connection; the
  arguments it builds ours with are handed on to uvicorn's protocol as they are, unread;
- uvicorn's protocol for its documented `http=` name (`httptools`), found in the table through which
  uvicorn's `Config` itself resolves that name (`uvicorn.config.HTTP_PROTOCOLS`: public by name, though
  not documented; a uvicorn without it fails at start); it is composed, not subclassed, and driven only
  through asyncio's `Protocol` methods;
- asyncio's `Protocol` and `Transport`: this wrapper is the transport's protocol, so it sees every byte,
  every pause and resumption of writing, and the connection's end, as uvicorn's protocol does;
- httptools' parser, the same one uvicorn reads requests with, so both see the same request boundaries;
- uvicorn's documented response framing ("Server Behavior"): a response without Content-Length is sent
  chunked, and `send` returns only once the socket's buffer is below its high-water mark. A chunk of
  HTTP/1.1 is the same bytes whoever writes it, and the hub writes only while the stream's task waits
  between two `send`s, never inside one;
- context variables: asyncio copies the current context into every task and callback, so the task that
  uvicorn starts for a request, while this wrapper hands it the request's bytes, knows its connection.
  Under any other server, or a uvicorn told to give each request a fresh context, there is no connection
  to find and every frame goes through `send`.

`tests/unit/test_connection.py` holds all of this to the installed uvicorn.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, ClassVar, cast

import httptools
from starlette.types import Scope
from uvicorn.config import HTTP_PROTOCOLS

# The connection whose bytes are being handed to uvicorn, and so of every request task uvicorn starts.
_SERVING: ContextVar[HttpConnection | None] = ContextVar("switchboard_connection", default=None)


def chunk(body: bytes) -> bytes:
    """`body` as one HTTP/1.1 chunk, as a server frames a body message of a chunked response."""
    return b"%x\r\n%s\r\n" % (len(body), body)


def uvicorn_protocol(name: str) -> type[asyncio.Protocol]:
    """The protocol class uvicorn serves with for its `http=` name `name`."""
    module, _, attribute = HTTP_PROTOCOLS[name].partition(":")
    found = getattr(importlib.import_module(module), attribute)
    if not (isinstance(found, type) and issubclass(found, asyncio.Protocol)):
        raise TypeError(f"uvicorn's http={name!r} is no asyncio.Protocol: {found!r}")
    return found


class HttpConnection(asyncio.Protocol):
    """One client connection: uvicorn's protocol (`inner`) behind a header deadline, and a writer of chunks
    onto the socket for the response in progress (`write`)."""

    inner: ClassVar[type[asyncio.Protocol]]
    header_timeout_s: ClassVar[float] = 10.0

    __slots__ = ("_gone", "_loop", "_parser", "_paused", "_protocol", "_timer", "_transport", "_waiting_since")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._protocol = self.inner(*args, **kwargs)
        # Only the callbacks defined here are called: no header, URL or body is copied out.
        self._parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        # When the headers now awaited began to be (loop time), None while none are; and the timer that
        # checks them, if one is set.
        self._waiting_since: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False
        self._gone = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._await_headers()
        self._protocol.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._parser is not None:
            try:
                self._parser.feed_data(data)
            except (httptools.HttpParserUpgrade, httptools.HttpParserError):
                # What follows an upgrade is another protocol's; a request that does not parse is
                # answered 400 by uvicorn, whose parser is the same, and the connection closed.
                self._parser = None
        token = _SERVING.set(self)
        try:
            self._protocol.data_received(data)
        finally:
            _SERVING.reset(token)

    def eof_received(self) -> bool | None:
        return self._protocol.eof_received()

    def pause_writing(self) -> None:
        self._paused = True
        self._protocol.pause_writing()

    def resume_writing(self) -> None:
        self._paused = False
        self._protocol.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # The parser holds this connection's callbacks: a cycle, broken here rather than by the collector.
        self._parser = None
        self._protocol.connection_lost(exc)

    # httptools' parser callbacks.
    def on_message_begin(self) -> None:
        # A connection's first request is timed from the moment it opened, not from its first byte.
        if self._waiting_since is None:
            self._await_headers()

    def on_headers_complete(self) -> None:
        # The timer is left to run out, not cancelled and set again for each request of a busy connection
        # (that costs more than parsing the request): the one in flight checks the next request's headers.
        self._waiting_since = None

    def write(self, framed: bytes) -> bool:
        """Write one chunk (`chunk`) of the response in progress now; or write nothing and return False
        where the server's `send` would not write at once: the socket's buffer is past its high-water
        mark, or the connection is closing or gone. The caller then leaves the data to the response's
        task, whose `send` waits for the buffer to drain, so a reader that does not read holds no more
        here than through `send`."""
        transport = self._transport
        if self._paused or self._gone or transport is None or transport.is_closing():
            return False
        transport.write(framed)
        return True

    def _await_headers(self) -> None:
        self._waiting_since = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_later(self.header_timeout_s, self._check)

    def _check(self) -> None:
        self._timer = None
        if self._waiting_since is None or self._transport is None:
            return
        left = self._waiting_since + self.header_timeout_s - self._loop.time()
        if left > 0:
            self._timer = self._loop.call_later(left, self._check)
        elif not self._transport.is_closing():
            # Closed without an answer: a response written now could land inside one still being sent on
            # a pipelined connection, and a client this slow is not waiting for one.
            self._transport.close()


def connection_protocol(header_timeout_s: float, http: str = "httptools") -> type[HttpConnection]:
    """What uvicorn's `http=` is given: its protocol for `http`, closing connections whose request headers
    take longer than `header_timeout_s`."""
    attributes = {"inner": uvicorn_protocol(http), "header_timeout_s": header_timeout_s, "__slots__": ()}
    return cast(type[HttpConnection], type("SwitchboardConnection", (HttpConnection,), attributes))


def chunk_writer(scope: Scope) -> Callable[[bytes], bool] | None:
    """What writes framed chunks (`chunk`) onto the connection of `scope`'s request, from outside the
    request's task, once the head of a response without Content-Length is out (so sent chunked, as the
    server documents: HTTP/1.1, a GET, status 200); None under any other server."""
    connection = _SERVING.get()
    if connection is None or scope.get("http_version") != "1.1" or scope.get("method") != "GET":
        return None
    return connection.write
