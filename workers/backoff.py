"""Backoff by Redis node: a node that does not answer is tried again later and later (half a second,
doubling, at most ten), while the others go on. Keyed by node, not by partition, so the hundreds of
partitions a dead Cluster master serves cost one failed attempt per interval, not one each: a worker
that tried them one by one would spend tens of seconds on connection attempts while the live nodes'
work waited. It says so once per node: when the node first fails and when it answers again."""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)

_FIRST_S = 0.5
_CAP_S = 10.0


class Backoff:
    def __init__(self, doing: str) -> None:
        # What the caller was doing, for the log ("visiting partitions", "taking work").
        self._doing = doing
        self._failures: dict[str, int] = {}
        self._until: dict[str, float] = {}

    def wait_s(self, node: str) -> float:
        """How long before `node` may be tried again (0: now)."""
        until = self._until.get(node)
        return 0.0 if until is None else max(0.0, until - time.monotonic())

    def failed(self, node: str, partition: int, error: Exception) -> float:
        """The wait before `node` is tried again (logged on its first failure in a row)."""
        failures = self._failures.get(node, 0)
        self._failures[node] = failures + 1
        delay_s = min(_FIRST_S * 2.0**failures, _CAP_S)
        self._until[node] = time.monotonic() + delay_s
        if failures == 0:
            logger.warning(
                "%s failed on Redis node %s (partition %d: %s); backing off",
                self._doing,
                node or "-",
                partition,
                error,
            )
        return delay_s

    def succeeded(self, node: str) -> None:
        """Forget the node's failures (logged if it had any)."""
        self._until.pop(node, None)
        if self._failures.pop(node, 0):
            logger.info("%s: the Redis node %s answers again", self._doing, node or "-")
