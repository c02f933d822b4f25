"""The hub's own writes to waiting event streams: taken only while a stream waits with nothing queued,
the same frames the stream's task would send, and anything unusual left to the task."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from api.connection import chunk, chunk_writer
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


def test_no_writer_for_a_request_that_came_through_no_connection_of_ours() -> None:
    assert chunk_writer({"type": "http", "http_version": "1.1", "method": "GET"}) is None


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
