"""A deadline on request headers: a connection that has not sent a request's whole header block within
`SWITCHBOARD_HEADER_TIMEOUT_S` is closed.

uvicorn has no such deadline: its keep-alive timeout runs only between requests and is cancelled by the
first byte of the next one, so a client that sends a header line every few seconds holds its connection
(and its memory) for as long as it likes, and a few hundred such clients hold a process's connections.
The deadline runs from the moment the connection opens (for its first request) or from the first byte
of each later request, and ends when the parser has read the request's headers; a body, a response and
an event stream that runs for hours are not under it.

This is uvicorn's own httptools protocol, passed through its public `http=` setting, with the deadline
added on the two points where the parser says a request began and its headers ended (httptools' callback
interface); everything else is uvicorn's.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _HeaderDeadline(HttpToolsProtocol):
    header_timeout_s = 10.0
    _deadline: asyncio.TimerHandle | None = None
    _transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._transport = transport
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # A connection's first request is timed from the moment it opened, not from its first byte.
        if self._deadline is None:
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def _arm(self) -> None:
        self._deadline = asyncio.get_running_loop().call_later(self.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        # Closed without an answer: a response written now could land inside one still being sent on a
        # pipelined connection, and a client this slow is not waiting for one.
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


def header_deadline(timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (`http=`), closing connections whose headers take longer than `timeout_s`."""
    return type("HeaderDeadlineProtocol", (_HeaderDeadline,), {"header_timeout_s": timeout_s})
