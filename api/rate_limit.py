"""Abuse limits, per API process: a token bucket per credential, and a brake on guessing credentials.

- Each credential may make `rate_limit_per_s` requests a second on average, `rate_limit_burst` at once;
  past that it gets 429 `too_many_requests` with `Retry-After` (whole seconds, which the SDKs honour) and
  nothing is done. The bucket is keyed by the credential as authentication reads it
  (`api.auth.bearer_token`: scheme in any case, surrounding whitespace dropped), so a padded or
  re-cased header is the same credential with the same bucket.
- The brake: an address (the peer, or the client a trusted proxy forwarded for, `api.proxies`) that gets
  `auth_failure_limit` 401s within `auth_failure_window_s` is braked for the rest of that window. A
  braked address's requests are still authenticated, and one whose credential is valid is served as
  ever (subject to its own bucket): behind a proxy or a NAT many people share one address, and one of
  them guessing must not lock the others out. A braked address's failed attempt is answered 429 (not
  401) with `Retry-After` for the rest of the window, only after `BRAKED_FAILURE_DELAY_S`, and still
  counts as a failure. So guessing gets slower without refusing anyone who holds a credential: each
  guess ties up one of the guesser's connections for the delay, while a credential is 256 random bits,
  far past reach at any rate. Only `HELD_PER_ADDRESS` failures of one address wait out their delay at
  a time (the rest are answered at once, with `Connection: close`), so the delay cannot be turned into
  a way of holding this process's memory.

The limits live in each process's memory, so N API replicas allow N times the rate: they bound what one
connection-happy client can make one process do, cheaply (no Redis round trip of their own).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.asgi import header, send_refusal
from api.auth import bearer_token
from api.settings import ApiSettings
from common.codec import sha256_hex

_TRACKED = 100_000
_KEPT_CHARS = 128
BRAKED_FAILURE_DELAY_S = 1.0
HELD_PER_ADDRESS = 64


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
    def __init__(self, settings: ApiSettings) -> None:
        self._rate = settings.rate_limit_per_s
        self._burst = float(settings.rate_limit_burst)
        self._failure_limit = settings.auth_failure_limit
        self._window = settings.auth_failure_window_s
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._failures: OrderedDict[str, _Failures] = OrderedDict()
        self._held: Counter[str] = Counter()

    def _credential_wait(self, credential: str, now: float) -> float:
        if self._rate <= 0:
            return 0.0
        # A table entry costs the same whatever a caller sends: a credential of any length is kept by
        # its digest (real ones are under a hundred characters, so most go as they are).
        if len(credential) > _KEPT_CHARS:
            credential = sha256_hex(credential)
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

    def _braked_for(self, address: str, now: float) -> float:
        """How long `address` stays braked (0: it is not)."""
        failures = self._failures.get(address)
        if failures is None or not self._failure_limit or failures.count < self._failure_limit:
            return 0.0
        left = failures.since + self._window - now
        if left <= 0:
            del self._failures[address]
            return 0.0
        return left

    def _failed(self, address: str) -> None:
        now = time.monotonic()
        failures = self._failures.get(address)
        if failures is None or now - failures.since > self._window:
            failures = self._failures[address] = _Failures(0, now)
        failures.count += 1
        _lru_touch(self._failures, address)

    async def __call__(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """Serve `scope` through `app`, or answer 429 when a limit says so."""
        credential = bearer_token(header(scope, b"authorization"))
        client = scope.get("client")
        address = client[0] if client else ""
        if credential:
            wait = self._credential_wait(credential, time.monotonic())
            if wait:
                retry = max(1, math.ceil(wait))
                why = f"this credential is limited to {self._rate:g} requests a second (bursts of {self._burst:g})"
                await send_refusal(
                    send, 429, "too_many_requests", f"{why}; retry in {retry} s", {"Retry-After": str(retry)}
                )
                return
        # Whether the address was braked is decided when the request came in: the failure that trips the
        # brake is still answered 401.
        braked = self._braked_for(address, time.monotonic()) > 0
        refused = False

        async def observed(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 401:
                self._failed(address)
                refused = braked
            if not refused:
                await send(message)

        await app(scope, receive, observed)
        if refused:
            await self._brake(address, send)

    async def _brake(self, address: str, send: Send) -> None:
        """Answer a braked address's failed attempt (its 401 was held back): 429, after the delay."""
        extra: dict[str, str] = {}
        if self._held[address] < HELD_PER_ADDRESS:
            self._held[address] += 1
            try:
                await asyncio.sleep(BRAKED_FAILURE_DELAY_S)
            finally:
                self._held[address] -= 1
                if not self._held[address]:
                    del self._held[address]
        else:
            extra["Connection"] = "close"
        retry = max(1, math.ceil(self._braked_for(address, time.monotonic())))
        extra["Retry-After"] = str(retry)
        message = f"too many failed sign-ins from this address; this credential is not valid; retry in {retry} s"
        await send_refusal(send, 429, "too_many_requests", message, extra)
