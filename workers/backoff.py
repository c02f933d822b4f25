"""Backoff by Redis node: a node that does not answer is tried again later and later (half a second,
doubling, at most ten), while the others go on. Keyed by node, not by partition, so the hundreds of
partitions a dead Cluster master serves cost one failed attempt per interval, not one each: a worker
that tried them one by one would spend tens of seconds on connection attempts while the live nodes'
work waited."""

from __future__ import annotations

import time

_FIRST_S = 0.5
_CAP_S = 10.0


class Backoff:
    def __init__(self) -> None:
        self._failures: dict[str, int] = {}
        self._until: dict[str, float] = {}

    def wait_s(self, node: str) -> float:
        """How long before `node` may be tried again (0: now)."""
        until = self._until.get(node)
        return 0.0 if until is None else max(0.0, until - time.monotonic())

    def failed(self, node: str) -> tuple[float, bool]:
        """The wait before `node` is tried again, and whether this is the first failure in a row (the
        one worth a log line)."""
        failures = self._failures.get(node, 0)
        self._failures[node] = failures + 1
        delay_s = min(_FIRST_S * 2**failures, _CAP_S)
        self._until[node] = time.monotonic() + delay_s
        return delay_s, failures == 0

    def succeeded(self, node: str) -> bool:
        """Forget the node's failures; whether it had any."""
        self._until.pop(node, None)
        return self._failures.pop(node, 0) > 0
