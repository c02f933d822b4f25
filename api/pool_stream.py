"""A pool member's call stream: the calls of one registration handed to this member, as SSE frames.

The member is woken by the session's live channel (a dispatch to its registration) and, every half claim
interval, also reclaims calls another member took and left unacked. Frames are `data: <the call's
client_tool_dispatched event>`, and `data: <client_tool_failed event>` when a call of the registration
fails while a member may be running it (`data: <input_provided event>` when an input request one of its
calls made is answered or ends); a registration or session that goes away ends the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncGenerator

from api.sse import ending
from api.state import AppState
from broker.errors import NotFound, SwitchboardError
from broker.services.live import Signal, Subscription

_KEEPALIVE = b": keep-alive\n\n"


def _frames(events: list[str]) -> bytes:
    return b"".join(b"data: %s\n\n" % event.encode() for event in events)


_WAKES = (b'"client_tool_dispatched"', b'"client_tool_acked"', b'"client_left"')
_FAILED = b'"type":"client_tool_failed"'
# The end of an input request one of the registration's calls made: the member running the call reads it.
_PROVIDED = b'"type":"input_provided"'


def _concerns(items: list[bytes], client_id: bytes) -> bool:
    """Whether live events may have a call for this member: one dispatched to its registration, an ack
    that made room under its prefetch, or the registration ending."""
    return any(client_id in item and any(kind in item for kind in _WAKES) for item in items)


async def call_stream(
    state: AppState,
    session_id: str,
    client_id: str,
    member: str,
    prefetch: int,
    subscription: Subscription,
    first: list[str],
) -> AsyncGenerator[bytes, None]:
    pools = state.broker.pools
    settings = state.broker.settings
    claim_every = settings.pool_claim_s / 2
    state.metrics.streams.inc()
    try:
        yield b"retry: %d\n\n" % settings.stream_retry_ms
        handed, cid = first, client_id.encode()
        next_reclaim = time.monotonic() + claim_every
        while True:
            if handed:
                yield _frames(handed)
            item: bytes | Signal | None
            try:
                async with asyncio.timeout(max(0.0, next_reclaim - time.monotonic())):
                    item = await subscription.get()
            except TimeoutError:
                item = Signal.LAGGED  # time to reclaim; nothing was lost
            last_frame = ending(item, settings.drain_retry_ms)
            if last_frame is not None:
                yield last_frame
                return
            if item is None:
                yield _KEEPALIVE
            # Only pointers to events the hub holds anyway: taken all at once.
            items = [item, *subscription.queued(sys.maxsize)] if isinstance(item, bytes) else []
            failures = [event for event in items if (_FAILED in event or _PROVIDED in event) and cid in event]
            if failures:
                # Calls of this registration that failed (cancelled, timed out, their run gone): the member
                # running one stops it. Best effort, like every live frame: a result posted after is 409.
                # So are the answers to the input requests its calls made, which the member waits on.
                yield b"".join(b"data: %s\n\n" % event for event in failures)
            reclaim = time.monotonic() >= next_reclaim
            if reclaim:
                next_reclaim = time.monotonic() + claim_every
            elif items and not _concerns(items, cid):
                handed = []
                continue
            try:
                handed = await pools.take(session_id, client_id, member, reclaim=reclaim, prefetch=prefetch)
            except NotFound:
                return
    finally:
        state.metrics.streams.dec()
        state.hub.unsubscribe(subscription)
        # A member that cannot be forgotten now is forgotten never: harmless, its calls are reclaimable.
        with contextlib.suppress(SwitchboardError):
            await pools.leave(session_id, client_id, member)
