"""Abuse limits, per API process: a token bucket per credential, and a brake on guessing credentials.

- Each credential (the Authorization header's value) may make `rate_limit_per_s` requests a second on
  average, `rate_limit_burst` at once; past that it gets 429 `too_many_requests` with `Retry-After`
  (whole seconds, which the SDKs honour) and nothing is done.
- An address (the peer, or the proxy's forwarded one when uvicorn trusts it) that gets
  `auth_failure_limit` 401s within `auth_failure_window_s` is refused with 429 for the rest of that
  window, for every credential that has not already succeeded from this process: guesses stop being
  checked at all, while people behind the same address who hold a working credential carry on.

The limits live in each process's memory, so N API replicas allow N times the rate: they bound what one
connection-happy client can make one process do, cheaply (no Redis round trip on any request).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.asgi import header, send_refusal
from broker.settings import Settings

_TRACKED = 100_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


@dataclass(slots=True)
class _Failures:
    count: int
    since: float


def _lru_touch(table: OrderedDict[str, Any], key: str) -> None:
    table.move_to_end(key)
    while len(table) > _TRACKED:
        table.popitem(last=False)


class RateLimits:
    def __init__(self, settings: Settings) -> None:
        self._rate = settings.rate_limit_per_s
        self._burst = float(settings.rate_limit_burst)
        self._failure_limit = settings.auth_failure_limit
        self._window = settings.auth_failure_window_s
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._failures: OrderedDict[str, _Failures] = OrderedDict()
        self._good: OrderedDict[str, None] = OrderedDict()

    def _credential_wait(self, credential: str, now: float) -> float:
        if self._rate <= 0:
            return 0.0
        bucket = self._buckets.get(credential)
        if bucket is None:
            bucket = self._buckets[credential] = _Bucket(self._burst, now)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.at) * self._rate)
        bucket.at = now
        _lru_touch(self._buckets, credential)
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / self._rate

    def _address_wait(self, address: str, credential: str, now: float) -> float:
        failures = self._failures.get(address)
        if failures is None or failures.count < self._failure_limit or credential in self._good:
            return 0.0
        left = failures.since + self._window - now
        if left <= 0:
            del self._failures[address]
            return 0.0
        return left

    def _observe(self, address: str, credential: str, status: int) -> None:
        if status == 401:
            now = time.monotonic()
            failures = self._failures.get(address)
            if failures is None or now - failures.since > self._window:
                failures = self._failures[address] = _Failures(0, now)
            failures.count += 1
            _lru_touch(self._failures, address)
        elif status < 400 and credential:
            self._good[credential] = None
            _lru_touch(self._good, credential)

    async def __call__(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """Serve `scope` through `app`, or answer 429 when a limit says so."""
        credential = header(scope, b"authorization") or ""
        client = scope.get("client")
        address = client[0] if client else ""
        now = time.monotonic()
        wait = self._address_wait(address, credential, now) if self._failure_limit else 0.0
        why = "too many failed sign-ins from this address"
        if not wait and credential:
            wait = self._credential_wait(credential, now)
            why = f"this credential is limited to {self._rate:g} requests a second (bursts of {self._burst:g})"
        if wait:
            retry = max(1, math.ceil(wait))
            await send_refusal(
                send, 429, "too_many_requests", f"{why}; retry in {retry} s", {"Retry-After": str(retry)}
            )
            return

        async def observed(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._observe(address, credential, message["status"])
            await send(message)

        await app(scope, receive, observed)
