"""Live fan-out of appended events: one pub/sub connection per process, however many streams it serves.

Delivery is at most once (pub/sub), so readers never trust it alone: every stored event carries a seq that
increases by exactly one, a reader that sees a gap re-reads the log, and a subscription that overflowed
or outlived a lost connection is marked `lagged` so its reader re-reads too.

A reader that can write a message out by itself (an event stream, `api.sse`) sets its subscription's
`direct`: while it waits with nothing queued, the hub hands it each message there, and its task is not
woken at all (with thousands of streams, a task step per stream per event costs several times the write).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from enum import Enum

from redis.asyncio.client import PubSub

from broker.errors import BrokerUnavailable
from common.tasks import cancel_and_wait

logger = logging.getLogger(__name__)

_DELETED = b"deleted"


class Signal(Enum):
    LAGGED = "lagged"
    DELETED = "deleted"
    CLOSING = "closing"


@dataclass(slots=True)
class Published:
    """One published message's items, as every local reader of its channel is offered it. `memo` holds
    what readers make of it, keyed by how they read it, so what many readers share is made once."""

    items: list[bytes]
    # When the hub handed it out (a reader that takes it is active then, `Subscription.active_at`).
    at: float
    memo: dict[Hashable, object] = field(default_factory=dict)


class Subscription:
    """One reader's view of a channel: events in order, or a signal to re-read the log or to stop."""

    # Slots: the hub touches every subscription of a channel for every message, thousands of them.
    __slots__ = (
        "_closing",
        "_deleted",
        "_items",
        "_lagged",
        "_limit",
        "_quiet",
        "_waiter",
        "active_at",
        "channel",
        "direct",
    )

    def __init__(self, channel: str, limit: int) -> None:
        self.channel = channel
        self._items: deque[bytes] = deque()
        self._limit = limit
        self._lagged = False
        self._deleted = False
        self._closing = False
        self._quiet = False
        # When `get` last returned: the hub's keep-alive tick nudges readers quiet for an interval.
        self.active_at = time.monotonic()
        # The reader waits on one plain future that `push` resolves, with no timer of its own: under load
        # every hop through the event loop delays each event by a loop turn, and every object a waiting
        # reader holds outlives the young GC generations (thousands of streams make that a full
        # collection every few events).
        self._waiter: asyncio.Future[None] | None = None
        # Takes a whole message while the reader waits in `get` (so nothing is queued or flagged), True when
        # it did; False leaves the message to the queue and the reader's task, as if there were none.
        self.direct: Callable[[Published], bool] | None = None

    def push(self, data: bytes) -> None:
        if data == _DELETED:
            self._deleted = True
        elif len(self._items) >= self._limit:
            # A slow reader loses the queued events, not the stream: it re-reads them from the log.
            self._items.clear()
            self._lagged = True
        else:
            self._items.append(data)
        self._wake()

    def offer(self, message: Published) -> None:
        """All of a message's items (never the deletion, which `push` takes): to `direct` if the reader is
        waiting for its next event, else queued one by one."""
        waiter = self._waiter
        if waiter is not None and self.direct is not None and not waiter.done() and self.direct(message):
            self.active_at = message.at
            return
        for item in message.items:
            self.push(item)

    def mark_lagged(self) -> None:
        self._lagged = True
        self._wake()

    def close(self) -> None:
        """End the reader's stream (the process is shutting down, or its client went away)."""
        self._closing = True
        self._wake()

    def nudge(self) -> None:
        """Make a waiting `get` return None (the stream sends a keep-alive)."""
        self._quiet = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def get(self) -> bytes | Signal | None:
        """The next event, a signal, or None when the hub's keep-alive tick found the reader quiet."""
        while True:
            if self._lagged:
                self._lagged = False
                self._items.clear()
                return self._got(Signal.LAGGED)
            # What was published before the deletion (the run's end) is delivered before it.
            if self._items:
                return self._got(self._items.popleft())
            if self._deleted:
                return Signal.DELETED
            if self._closing:
                return Signal.CLOSING
            if self._quiet:
                self._quiet = False
                return self._got(None)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def _got(self, item: bytes | Signal | None) -> bytes | Signal | None:
        self.active_at = time.monotonic()
        return item

    def queued(self, max_bytes: int) -> list[bytes]:
        """Events already queued behind the one `get` returned, up to about `max_bytes`, so a reader can
        send a burst in one write without building a write larger than that (none after a lag, which
        `get` reports next). The rest stay queued for the next `get`."""
        if self._lagged:
            return []
        items: list[bytes] = []
        size = 0
        while self._items and size + len(self._items[0]) <= max_bytes:
            item = self._items.popleft()
            size += len(item)
            items.append(item)
        return items


@dataclass
class _Channel:
    subscribers: set[Subscription] = field(default_factory=set)
    # SUBSCRIBE / UNSUBSCRIBE commands sent and not yet confirmed, in order ("s" or "u").
    pending: deque[str] = field(default_factory=deque)
    live: bool = False
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    idle_since: float = 0.0
    # Subscribed again after a lost connection: what was published between the readers' first re-read of
    # the log and this subscription taking effect reached nobody, so the readers re-read once more then.
    recovering: bool = False

    def deliver(self, data: bytes) -> None:
        # A script publishes all its events on a channel as one message, one per line.
        items = data.split(b"\n")
        if _DELETED in items:
            for item in items:
                for subscription in list(self.subscribers):
                    subscription.push(item)
            return
        message = Published(items, time.monotonic())
        for subscription in list(self.subscribers):
            subscription.offer(message)


class LiveHub:
    """Subscribes each session channel once per process and hands its messages to local subscriptions."""

    def __init__(
        self,
        pubsub: Callable[[], PubSub],
        control: str,
        session_channel: Callable[[str], str],
        *,
        keepalive_s: float,
        queue_limit: int = 2048,
        linger_s: float = 10.0,
    ) -> None:
        """`session_channel` names a session's live channel (`Broker.live_hub` builds the hub)."""
        self._new_pubsub = pubsub
        self._session_channel = session_channel
        self._keepalive_s = keepalive_s
        # Subscribed at start, so the connection exists before the reader first waits on it.
        self._control = control
        self._queue_limit = queue_limit
        self._linger_s = linger_s
        self._channels: dict[str, _Channel] = {}
        self._pubsub: PubSub | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._pubsub = await self._open()
        self._task = asyncio.create_task(self._read(), name="live-hub")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        for channel in self._channels.values():
            for subscription in channel.subscribers:
                subscription.mark_lagged()
        if self._pubsub is not None:
            await _close(self._pubsub)

    def close_streams(self) -> None:
        """Tell every reader to end its stream, so shutdown need not wait for clients to hang up."""
        for channel in self._channels.values():
            for subscription in channel.subscribers:
                subscription.close()

    @property
    def streams(self) -> int:
        return sum(len(channel.subscribers) for channel in self._channels.values())

    async def subscribe(self, channel_name: str, confirm_s: float = 5.0) -> Subscription:
        """A subscription that receives every message published after this returns."""
        subscription = Subscription(channel_name, self._queue_limit)
        channel = self._channels.setdefault(channel_name, _Channel())
        channel.subscribers.add(subscription)
        try:
            if not channel.live or channel.pending:
                if not channel.pending or channel.pending[-1] != "s":
                    await self._send(channel, channel_name, "s")
                await asyncio.wait_for(channel.ready.wait(), confirm_s)
        except BaseException:
            self.unsubscribe(subscription)
            raise
        return subscription

    async def subscribe_session(self, session_id: str, confirm_s: float = 5.0) -> Subscription:
        """A subscription to the session's appended events (and its deletion), from when this returns."""
        return await self.subscribe(self._session_channel(session_id), confirm_s)

    def unsubscribe(self, subscription: Subscription) -> None:
        channel = self._channels.get(subscription.channel)
        if channel is None:
            return
        channel.subscribers.discard(subscription)
        if not channel.subscribers:
            channel.idle_since = time.monotonic()

    async def _open(self) -> PubSub:
        pubsub = self._new_pubsub()
        try:
            await pubsub.subscribe(self._control)
        except Exception as error:
            await _close(pubsub)
            raise BrokerUnavailable(f"Redis is unreachable: {error}") from error
        return pubsub

    async def _send(self, channel: _Channel, name: str, command: str) -> None:
        assert self._pubsub is not None
        channel.ready.clear()
        channel.pending.append(command)
        if command == "s":
            await self._pubsub.subscribe(name)
        else:
            await self._pubsub.unsubscribe(name)

    async def _read(self) -> None:
        last_sweep = time.monotonic()
        # Keep-alives land within a quarter interval of due, however many streams there are.
        tick = min(1.0, self._keepalive_s / 4)
        while True:
            try:
                assert self._pubsub is not None
                message = await self._pubsub.get_message(ignore_subscribe_messages=False, timeout=tick)
                if message is not None:
                    self._handle(message)
                if time.monotonic() - last_sweep > tick:
                    last_sweep = time.monotonic()
                    self._nudge_quiet(last_sweep)
                    await self._release_idle()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("live hub lost its Redis connection; reconnecting")
                await self._reconnect()

    def _handle(self, message: dict[str, object]) -> None:
        raw_name = message.get("channel")
        name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
        channel = self._channels.get(name)
        if channel is None:
            return
        kind = message.get("type")
        if kind == "message":
            data = message.get("data")
            if isinstance(data, bytes):
                channel.deliver(data)
        elif kind in ("subscribe", "unsubscribe") and channel.pending:
            channel.pending.popleft()
            channel.live = kind == "subscribe"
            if not channel.pending and channel.live:
                channel.ready.set()
                if channel.recovering:
                    channel.recovering = False
                    for subscription in channel.subscribers:
                        subscription.mark_lagged()
            elif not channel.pending and not channel.subscribers:
                del self._channels[name]

    def _nudge_quiet(self, now: float) -> None:
        quiet_since = now - self._keepalive_s
        for channel in self._channels.values():
            for subscription in channel.subscribers:
                if subscription.active_at <= quiet_since:
                    subscription.nudge()

    async def _release_idle(self) -> None:
        cutoff = time.monotonic() - self._linger_s
        for name, channel in list(self._channels.items()):
            if not channel.subscribers and channel.live and not channel.pending and channel.idle_since < cutoff:
                await self._send(channel, name, "u")

    async def _reconnect(self) -> None:
        # Whatever was published while the connection was down is gone: every reader re-reads the log.
        for channel in self._channels.values():
            channel.live = False
            channel.pending.clear()
            for subscription in channel.subscribers:
                subscription.mark_lagged()
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await _close(self._pubsub)
        while True:
            try:
                self._pubsub = await self._open()
                break
            except BrokerUnavailable:
                await asyncio.sleep(0.5)
        for name, channel in list(self._channels.items()):
            if channel.subscribers:
                channel.recovering = True
                await self._send(channel, name, "s")
            else:
                del self._channels[name]


async def _close(pubsub: PubSub) -> None:
    await pubsub.aclose()
