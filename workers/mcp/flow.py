"""What a grant's server may make one connection read, and when: the pace of everything it sends, and
whether its standing streams are read at all.

A `Flow` is one connection's: whether the grant is in use (a listing or a call running, or one that ended
within `LINGER_S`), and two token buckets, events and bytes, that every answer the server sends spends
from. Its standing streams (the GET stream, the HTTP+SSE stream, a `subscriptions/listen` stream) are read
only while the grant is in use: a server that floods them costs nothing while no step or call needs it.
Which request an exchange carries, and its deadline, is workers/mcp/exchanges.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

# After the last listing or call of a grant ends its standing streams are read this much longer, so a
# list change the server announced with a call's answer is seen by the next step.
LINGER_S = 1.0
# Server-sent events (keep-alive comments included) one connection's answers are read at, on average,
# and the burst allowed: past it reading waits, so a flood costs the worker at most this pace of parsing
# (the server's writes wait in its socket).
EVENTS_PER_S = 100.0
EVENT_BURST = 200.0
# Bytes the same, past a burst one whole answer fits in.
BYTES_PER_S = 2 * 1024 * 1024
BYTE_BURST = 16 * 1024 * 1024
# What a connection may owe, in seconds of either pace. A chunk of many events is handed on a burst of them
# at a time (workers/mcp/wire.py), so a debt stays within a burst's wait; this cap is what holds if one
# chunk ever counts for more (64 KiB of blank lines is 32,768 events, some 325 s at 100 a second).
MAX_OWED_S = 10.0
# A standing stream the server ends is opened again at most this often (its `retry:` is not obeyed below).
STANDING_REOPEN_S = 1.0


class Bucket:
    """A token bucket: `rate` a second, at most `burst` held."""

    def __init__(self, rate: float, burst: float, max_owed_s: float = MAX_OWED_S) -> None:
        self._rate = rate
        self._burst = burst
        self._floor = -max_owed_s * rate
        self._tokens = burst
        self._at = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now

    def spend(self, amount: float) -> float:
        """Take `amount`, into debt if need be (at most `max_owed_s` of it); how long to wait before taking
        more (0 within the burst)."""
        self._refill()
        self._tokens = max(self._floor, self._tokens - amount)
        return 0.0 if self._tokens >= 0 else -self._tokens / self._rate

    def take(self) -> bool:
        """Take one token if there is one."""
        self._refill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class Flow:
    """One connection's pace and its grant's use (see the module's docstring)."""

    def __init__(self) -> None:
        self._users = 0
        self._in_use = asyncio.Event()
        self._lingering: asyncio.TimerHandle | None = None
        self._events = Bucket(EVENTS_PER_S, EVENT_BURST)
        self._bytes = Bucket(BYTES_PER_S, BYTE_BURST)
        self._standing_opened = 0.0
        self.events_read = 0

    @property
    def in_use(self) -> bool:
        return self._in_use.is_set()

    @contextlib.contextmanager
    def using(self) -> Iterator[None]:
        """The grant is in use while the block runs (and `LINGER_S` after the last such block)."""
        self._users += 1
        if self._lingering is not None:
            self._lingering.cancel()
            self._lingering = None
        self._in_use.set()
        try:
            yield
        finally:
            self._users -= 1
            if self._users == 0:
                self._lingering = asyncio.get_running_loop().call_later(LINGER_S, self._unused)

    def _unused(self) -> None:
        self._lingering = None
        if self._users == 0:
            self._in_use.clear()

    async def wait_in_use(self) -> None:
        await self._in_use.wait()

    async def standing_turn(self) -> None:
        """Before a standing stream is opened: wait until the grant is in use and the last one is old enough."""
        await self._in_use.wait()
        wait_s = self._standing_opened + STANDING_REOPEN_S - time.monotonic()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        self._standing_opened = time.monotonic()

    def spend(self, size: int, events: int) -> float:
        """What one chunk of an answer cost: how long to wait before reading more (0 within the bursts)."""
        self.events_read += events
        return max(self._bytes.spend(size), self._events.spend(events) if events else 0.0)

    def close(self) -> None:
        if self._lingering is not None:
            self._lingering.cancel()
            self._lingering = None
