"""Writing an event stream's chunks straight onto its connection, from outside the stream's task.

The live hub hands each published message to every waiting stream in one pass (`api.sse.LiveCursor`):
with thousands of streams, waking each stream's task to write through uvicorn's `send` costs several
times the write itself. This writes exactly what uvicorn's `send` writes for a body message of a chunked
response, and only when `send` would write at once; otherwise it writes nothing and the stream's task
goes the ordinary way, through `send`.

It reads uvicorn's httptools cycle (the protocol `api.server` runs, `api.header_deadline`); under any
other server `chunk_writer` returns None and every frame goes through `send`.
"""

from __future__ import annotations

from starlette.types import Send
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle


def chunk(body: bytes) -> bytes:
    """`body` as one HTTP/1.1 chunk, framed as uvicorn frames a body message of a chunked response."""
    return b"%x\r\n%s\r\n" % (len(body), body)


class ChunkWriter:
    """Writes framed chunks onto one response's transport."""

    __slots__ = ("_cycle", "_flow", "_transport")

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle
        self._flow = cycle.flow
        self._transport = cycle.transport

    def write(self, framed: bytes) -> bool:
        """Write one chunk (`chunk`) now; or write nothing and return False where uvicorn's `send` would
        not write at once: the client is gone or the response is over, or the socket's buffer is past its
        high-water mark. The caller then leaves the data to the stream's task, whose `send` waits for the
        buffer to drain, so a reader that does not read holds no more here than through `send`."""
        cycle = self._cycle
        if self._flow.write_paused or cycle.disconnected or cycle.response_complete or self._transport.is_closing():
            return False
        self._transport.write(framed)
        return True


# What the writer reads of uvicorn's cycle besides its flow control: a uvicorn that no longer has them
# gets no writer (its streams go through `send`, as before this module) rather than failing them.
_CYCLE_STATE = ("transport", "disconnected", "response_complete", "response_started", "chunked_encoding")


def chunk_writer(send: Send) -> ChunkWriter | None:
    """A writer for the response that `send` (the server's own) belongs to, once its head is out with
    chunked encoding; None for any other server or response."""
    cycle = getattr(send, "__self__", None)
    if not isinstance(cycle, RequestResponseCycle) or not isinstance(getattr(cycle, "flow", None), FlowControl):
        return None
    if not all(hasattr(cycle, name) for name in _CYCLE_STATE):
        return None
    if not cycle.response_started or cycle.chunked_encoding is not True:
        return None
    return ChunkWriter(cycle)
