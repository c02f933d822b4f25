"""The hub's own writes to waiting event streams: taken only while a stream waits with nothing queued,
the same frames the stream's task would send, and anything unusual left to the task."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, cast

from starlette.types import Send
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from api.chunk_writer import chunk, chunk_writer
from api.sse import _CHUNK, LiveCursor, _burst
from broker.services.live import Published, Subscription

DEFAULT: frozenset[str] = frozenset()


def event(seq: int, kind: str = "client_tools_updated", body: str = "") -> bytes:
    return b'{"seq":%d,"created_at":"2026-12-02T00:00:00Z","type":"%s"%s}' % (seq, kind.encode(), body.encode())


def timing(seq: int) -> bytes:
    return b'{"seq":%d,"created_at":"2026-12-02T00:00:00Z","type":"custom","kind":"timing"}' % seq


def taker(taken: list[Published]) -> Callable[[Published], bool]:
    def take(message: Published) -> bool:
        taken.append(message)
        return True

    return take


class Socket:
    """A writer that takes chunks until told it is full."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.full = False

    def write(self, framed: bytes) -> bool:
        if self.full:
            return False
        self.written.append(framed)
        return True


def cursor(position: int, include: frozenset[str] = DEFAULT) -> tuple[LiveCursor, Socket]:
    socket = Socket()
    live = LiveCursor(position, include)
    live.write = socket.write
    return live, socket


def test_a_message_that_continues_the_stream_is_written_as_the_task_would_write_it() -> None:
    items = [event(4), timing(5), b'{"type":"text_delta","text":"hi"}', event(6)]
    for include in (DEFAULT, frozenset({"timing", "deltas"})):
        live, socket = cursor(3, include)
        assert live.offer(Published(items, 0.0))
        frames, reached = _burst(items, 3, include)
        assert socket.written == [chunk(frames)]
        assert live.last == reached == 6


def test_a_gap_or_a_repeat_is_left_to_the_task_and_nothing_is_written() -> None:
    for position in (1, 4, 9):
        live, socket = cursor(position)
        assert not live.offer(Published([event(4), event(5)], 0.0))
        assert (socket.written, live.last) == ([], position)
    live, socket = cursor(3)
    assert not live.offer(Published([event(4), event(6)], 0.0))
    assert (socket.written, live.last) == ([], 3)


def test_hidden_events_move_the_position_without_a_write() -> None:
    live, socket = cursor(7)
    assert live.offer(Published([timing(8)], 0.0))
    assert (socket.written, live.last) == ([], 8)
    assert live.offer(Published([b'{"type":"text_delta","text":"hi"}'], 0.0))
    assert (socket.written, live.last) == ([], 8)


def test_a_full_socket_leaves_the_message_to_the_task() -> None:
    live, socket = cursor(0)
    socket.full = True
    assert not live.offer(Published([event(1)], 0.0))
    assert live.last == 0


def test_events_larger_together_than_a_write_of_the_task_are_left_to_it() -> None:
    big = "," + '"x":"' + "y" * _CHUNK + '"'
    live, _ = cursor(0)
    assert not live.offer(Published([event(1, body=big), event(2)], 0.0))
    # One event is written whole however large, as the task writes it.
    assert live.offer(Published([event(1, body=big)], 0.0))
    assert live.last == 1


def test_the_frames_of_a_message_are_made_once_for_every_stream_that_shows_it_alike() -> None:
    message = Published([event(1)], 0.0)
    # Equal views asked for apart (two requests' `include`), not the same object.
    first, one = cursor(0, frozenset({"deltas"}))
    second, two = cursor(0, frozenset(["deltas"]))
    assert first.offer(message)
    assert second.offer(message)
    assert one.written[0] is two.written[0]


def test_a_stream_with_no_writer_is_left_to_its_task() -> None:
    live = LiveCursor(0, DEFAULT)
    assert not live.offer(Published([event(1)], 0.0))
    assert live.last == 0


def test_no_writer_for_a_send_that_is_not_uvicorns() -> None:
    async def send(message: object) -> None:
        del message

    assert chunk_writer(send) is None


async def test_the_hub_writes_only_to_a_reader_waiting_with_nothing_queued() -> None:
    subscription = Subscription("channel", limit=8)
    taken: list[Published] = []
    subscription.direct = taker(taken)
    # Not waiting: queued for the reader's task.
    subscription.offer(Published([b"a"], 0.0))
    assert taken == []
    assert await subscription.get() == b"a"

    waiting = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)
    subscription.offer(Published([b"b", b"c"], 123.0))
    assert [m.items for m in taken] == [[b"b", b"c"]]
    assert not waiting.done()
    # Active as of the message, so the keep-alive tick leaves it alone.
    assert subscription.active_at == 123.0

    # Refused: queued, and the reader wakes to it.
    subscription.direct = lambda message: False
    subscription.offer(Published([b"d", b"e"], 0.0))
    assert await waiting == b"d"
    assert subscription.queued(1024) == [b"e"]


async def test_a_woken_reader_is_not_written_to_before_it_runs() -> None:
    subscription = Subscription("channel", limit=8)
    taken: list[Published] = []
    subscription.direct = taker(taken)
    waiting = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)
    subscription.nudge()
    subscription.offer(Published([b"a"], 0.0))
    assert taken == []
    # Queued events come first, then the nudge's keep-alive.
    assert await waiting == b"a"
    assert await subscription.get() is None


class Transport:
    """What uvicorn's cycle writes, as written."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing


def uvicorn_cycle(transport: Transport) -> RequestResponseCycle:
    scope: Any = {"type": "http", "method": "GET", "path": "/", "headers": []}
    return RequestResponseCycle(
        scope=scope,
        transport=cast(asyncio.Transport, transport),
        flow=FlowControl(cast(asyncio.Transport, transport)),
        logger=logging.getLogger("test"),
        access_logger=logging.getLogger("test"),
        access_log=False,
        default_headers=[],
        message_event=asyncio.Event(),
        expect_100_continue=False,
        keep_alive=True,
        on_response=lambda: None,
    )


async def test_the_writer_writes_what_uvicorns_send_writes_and_only_when_it_would() -> None:
    """Against the installed uvicorn: its own chunk framing, its flow control and its disconnect."""
    transport = Transport()
    cycle = uvicorn_cycle(transport)
    assert chunk_writer(cast(Send, cycle.send)) is None
    await cycle.send({"type": "http.response.start", "status": 200, "headers": []})
    writer = chunk_writer(cast(Send, cycle.send))
    assert writer is not None
    transport.written.clear()
    body = b"id: 7\ndata: {}\n\n"
    await cycle.send({"type": "http.response.body", "body": body, "more_body": True})
    assert writer.write(chunk(body))
    assert transport.written == [chunk(body), chunk(body)]
    for stop in ("pause", "closing", "disconnected", "complete"):
        transport.written.clear()
        cycle = uvicorn_cycle(transport)
        await cycle.send({"type": "http.response.start", "status": 200, "headers": []})
        writer = chunk_writer(cast(Send, cycle.send))
        assert writer is not None
        if stop == "pause":
            cycle.flow.pause_writing()
        elif stop == "closing":
            transport.closing = True
        elif stop == "disconnected":
            cycle.disconnected = True
        else:
            await cycle.send({"type": "http.response.body", "body": b"", "more_body": False})
        transport.written.clear()
        assert not writer.write(chunk(body))
        assert transport.written == []
        transport.closing = False
