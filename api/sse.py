"""The event stream's frames: a cursor first, then each event as stored, for as long as the session lives.

Pub/sub only wakes the stream; the log is the truth. Seqs rise by exactly one, so a gap, an overflow or a
lost connection sends the stream back to the log to read what it missed, and a quiet stream checks the
head at every keep-alive, so no event is ever skipped and none is sent twice.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from api.connection import chunk, chunk_writer
from api.state import AppState
from broker.services.live import Published, Signal, Subscription
from common.events.blocks import as_text
from common.events.marks import (
    event_seq,
    extra_shown,
    has_images,
    has_rich_blocks,
    is_extension,
    is_logged,
    is_progress,
    is_timing,
)

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# A reader that does not read holds at most one chunk waiting to be written, plus one page of the log
# while it catches up: a chunk is cut at about _CHUNK bytes, and a page is read a few events at a time
# when its events are large (about _PAGE_BYTES a page), never more than _PAGE events.
_PAGE = 500
_FIRST_PAGE = 64
_PAGE_BYTES = 1 << 20
_CHUNK = 16 * 1024
# Where SwitchboardApp puts the server's own `send` for a stream request (see EventStreamResponse).
DIRECT_SEND = "switchboard.direct_send"


class EventStreamResponse(Response):
    """An event stream whose head goes out through the app's middleware, counted and guarded like any
    response, and whose frames go straight to the server's `send`: with thousands of streams each frame
    is written once per stream, and the middleware's wrappers cost more per frame than the write. One
    task watches for the client going away and ends the stream (Starlette's StreamingResponse runs a
    task group of two per stream). Given the stream's `cursor`, the hub writes its live events itself
    while the stream waits for them (`LiveCursor`), where the server lets it (`api.connection`)."""

    media_type = "text/event-stream"

    def __init__(
        self,
        frames: AsyncGenerator[bytes, None],
        subscription: Subscription,
        headers: dict[str, str] | None = None,
        on_close: Callable[[], None] | None = None,
        cursor: LiveCursor | None = None,
    ) -> None:
        self._frames = frames
        self._subscription = subscription
        self._on_close = on_close
        self._cursor = cursor
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS | (headers or {}))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        direct: Send = scope.get(DIRECT_SEND, send)
        watcher = asyncio.create_task(self._watch(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            writer = chunk_writer(scope)
            if self._cursor is not None and writer is not None:
                self._cursor.write = writer
                self._subscription.direct = self._cursor.offer
            async for frames in self._frames:
                if frames:
                    await direct({"type": "http.response.body", "body": frames, "more_body": True})
            await direct({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._subscription.direct = None
            watcher.cancel()
            # Now rather than whenever the collector finds it: the stream's count and subscription.
            await self._frames.aclose()
            if self._on_close is not None:
                self._on_close()

    async def _watch(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self._subscription.close()


async def open_stream(state: AppState, session_id: str, credential: str) -> tuple[Subscription, Callable[[], None]]:
    """A subscription to the session's live events, counted against the stream caps (429 past them), and
    what counts it out again (EventStreamResponse's `on_close`)."""
    close = state.stream_caps.open(session_id, credential)
    try:
        return await state.hub.subscribe_session(session_id), close
    except BaseException:
        close()
        raise


@dataclass(frozen=True, slots=True)
class _View:
    """A published message as one reader sees it: the frames of its shown events (and of its deltas, for
    a reader that asked), framed as one chunk, and the first and last seq it carries (None: no event)."""

    first: int | None
    last: int | None
    framed: bytes


# Left to the stream's task: a message whose events' seqs do not follow each other (the task reads the
# log), or several events larger together than a write the task would make (it cuts them at _CHUNK).
_TO_TASK = _View(-1, None, b"")


def _view(items: list[bytes], include: frozenset[str]) -> _View:
    frames: list[bytes] = []
    first: int | None = None
    last: int | None = None
    for item in items:
        if not is_logged(item):
            if extra_shown(item, include):
                frames.append(b"data: %s\n\n" % item)
            continue
        seq = event_seq(item)
        if last is not None and seq != last + 1:
            return _TO_TASK
        first = seq if first is None else first
        last = seq
        if shown(item, include):
            frames.append(_frame(seq, item, include))
    body = b"".join(frames)
    if len(frames) > 1 and len(body) > _CHUNK:
        return _TO_TASK
    return _View(first, last, chunk(body) if body else b"")


class LiveCursor:
    """An event stream's position (the last seq it has sent, or passed over as not shown to it) and what
    it shows. Once its response is under way and the server lets it (`write` set), the hub offers it each
    live message while its task waits (`Subscription.direct`): a message that continues from the position
    is written to the socket there and then, as the frames the task would have sent, and the task is not
    woken; anything else (a gap, a repeat, a full socket buffer) goes to the task as before. The frames
    of a message are made once for every stream that reads it the same way (`Published.memo`)."""

    __slots__ = ("include", "last", "write")

    def __init__(self, position: int, include: frozenset[str]) -> None:
        self.last = position
        self.include = include
        self.write: Callable[[bytes], bool] | None = None

    def offer(self, message: Published) -> bool:
        view = message.memo.get(self.include)
        if not isinstance(view, _View):
            view = message.memo[self.include] = _view(message.items, self.include)
        if view.first is not None and view.first != self.last + 1:
            return False
        if view.framed and (self.write is None or not self.write(view.framed)):
            return False
        if view.last is not None:
            self.last = view.last
        return True


def _frame(seq: int, data: bytes, include: frozenset[str]) -> bytes:
    return b"id: %d\ndata: %s\n\n" % (seq, as_seen(data, include))


def shown(data: bytes, include: frozenset[str]) -> bool:
    """Whether a logged event goes to a reader: timing, progress and extension events only to those that
    asked."""
    if is_timing(data):
        return "timing" in include
    if is_extension(data):
        return "extensions" in include
    return "progress" in include or not is_progress(data)


def as_seen(data: bytes, include: frozenset[str]) -> bytes:
    """A logged event as a reader gets it: image blocks only for readers that asked (`images`), audio and
    resource blocks only for those that asked for `extensions`; others a text block naming each, which
    the Subako SDK can read."""
    images = "images" not in include and has_images(data)
    rich = "extensions" not in include and has_rich_blocks(data)
    if not (images or rich):
        return data
    return as_text(data, images, rich)


async def _backlog(
    state: AppState, session_id: str, last: int, include: frozenset[str]
) -> AsyncIterator[tuple[bytes, int]]:
    """Frames of every stored event after `last`, in chunks of about _CHUNK bytes, with the seq each chunk
    reaches."""
    count = _FIRST_PAGE
    while True:
        rows = await state.broker.log.after(session_id, last, count)
        frames: list[bytes] = []
        buffered = size = 0
        for seq, data in rows:
            size += len(data)
            if shown(data, include):
                frame = _frame(seq, data, include)
                frames.append(frame)
                buffered += len(frame)
            last = seq
            if buffered >= _CHUNK:
                yield b"".join(frames), last
                frames, buffered = [], 0
        if frames:
            yield b"".join(frames), last
        if len(rows) < count:
            return
        count = max(1, min(_PAGE, count * _PAGE_BYTES // max(size, 1)))


def _live(item: bytes, last: int, include: frozenset[str]) -> tuple[bytes | None, int | None]:
    """What to send for a live message, and the seq reached; None for the seq means a gap was seen and
    the log must be read."""
    if not is_logged(item):
        # A live extra (a text delta): no seq, no id line, only for readers that asked.
        return (b"data: %s\n\n" % item if extra_shown(item, include) else None), last
    seq = event_seq(item)
    if seq <= last:
        return None, last
    if seq > last + 1:
        return None, None
    return (_frame(seq, item, include) if shown(item, include) else None), seq


def _burst(items: list[bytes], last: int, include: frozenset[str]) -> tuple[bytes, int | None]:
    """The frames of live messages that arrived together, for one write, and the seq reached; None for
    the seq when a gap was seen (what followed it is in the log too, and is read from there)."""
    frames: list[bytes] = []
    for item in items:
        frame, seq = _live(item, last, include)
        if frame:
            frames.append(frame)
        if seq is None:
            return b"".join(frames), None
        last = seq
    return b"".join(frames), last


def ending(item: bytes | Signal | None, retry_ms: int) -> bytes | None:
    """None while the stream goes on; else its last frame: when the process is shutting down (or the
    reader left), a hint to come back soon, to another replica, each reader after its own random share
    of `retry_ms`; nothing more when the session was deleted."""
    if item is Signal.CLOSING:
        return b": shutting down\nretry: %d\n\n" % random.randint(max(1, retry_ms // 10), retry_ms)
    return b"" if item is Signal.DELETED else None


async def event_stream(
    state: AppState, session_id: str, cursor: LiveCursor, subscription: Subscription
) -> AsyncGenerator[bytes, None]:
    """The stream's frames from `cursor` on. `cursor.last` is read and moved here only while the hub does
    not move it: the hub writes for the stream only while it waits in `subscription.get()`."""
    settings = state.broker.settings
    include = cursor.include
    state.metrics.streams.inc()
    try:
        yield b"id: %d\n\nretry: %d\n\n" % (cursor.last, settings.stream_retry_ms)
        async for frames, reached in _backlog(state, session_id, cursor.last, include):
            yield frames
            cursor.last = reached
        while True:
            item = await subscription.get()
            last_frame = ending(item, settings.drain_retry_ms)
            if last_frame is not None:
                yield last_frame
                return
            if item is None:
                yield b": keep-alive\n\n"
                if not await state.broker.sessions.exists(session_id):
                    return
            elif isinstance(item, bytes):
                burst, seq = _burst([item, *subscription.queued(_CHUNK)], cursor.last, include)
                if burst:
                    yield burst
                if seq is not None:
                    cursor.last = seq
                    continue
            # A gap, an overflow, a reconnect of the hub, or a quiet spell: the log says what was missed.
            async for frames, reached in _backlog(state, session_id, cursor.last, include):
                yield frames
                cursor.last = reached
    finally:
        state.metrics.streams.dec()
        state.hub.unsubscribe(subscription)
