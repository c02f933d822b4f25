"""The event stream's frames: a cursor first, then each event as stored, for as long as the session lives.

Pub/sub only wakes the stream; the log is the truth. Seqs rise by exactly one, so a gap, an overflow or a
lost connection sends the stream back to the log to read what it missed, and a quiet stream checks the
head at every keep-alive, so no event is ever skipped and none is sent twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from api.state import AppState
from broker.events import event_seq
from broker.live import Signal, Subscription

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_PAGE = 500


def _frame(seq: int, data: bytes) -> bytes:
    return b"id: %d\ndata: %s\n\n" % (seq, data)


async def _backlog(state: AppState, session_id: str, last: int) -> AsyncIterator[tuple[bytes, int]]:
    """Frames of every stored event after `last`, a page per chunk, with the seq each chunk reaches."""
    while True:
        rows = await state.broker.log.after(session_id, last, _PAGE)
        if rows:
            last = rows[-1][0]
            yield b"".join(_frame(seq, data) for seq, data in rows), last
        if len(rows) < _PAGE:
            return


async def event_stream(
    state: AppState, session_id: str, position: int, subscription: Subscription
) -> AsyncIterator[bytes]:
    settings = state.broker.settings
    state.metrics.streams.inc()
    try:
        yield b"id: %d\n\nretry: %d\n\n" % (position, settings.stream_retry_ms)
        last = position
        async for chunk, reached in _backlog(state, session_id, last):
            yield chunk
            last = reached
        while True:
            item = await subscription.get(settings.stream_keepalive_s)
            if item is Signal.DELETED or item is Signal.CLOSING:
                return
            if item is None:
                yield b": keep-alive\n\n"
                if not await state.broker.sessions.exists(session_id):
                    return
                item = Signal.LAGGED
            if isinstance(item, bytes):
                seq = event_seq(item)
                if seq <= last:
                    continue
                if seq == last + 1:
                    last = seq
                    yield _frame(seq, item)
                    continue
            # A gap, an overflow, a reconnect of the hub, or a quiet spell: the log says what was missed.
            async for chunk, reached in _backlog(state, session_id, last):
                yield chunk
                last = reached
    finally:
        state.metrics.streams.dec()
        state.hub.unsubscribe(subscription)
