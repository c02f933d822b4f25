"""Backoff after a failed visit or take: tried again later and later (half a second, doubling, at most
ten), while the rest goes on.

A node that cannot be reached is backed off as a whole, not partition by partition, so the hundreds of
partitions a dead Cluster master serves cost one failed attempt per interval: a worker that tried them
one by one would spend tens of seconds on connection attempts while the live nodes' work waited. Any
other failure (a script that refuses one partition's data) backs off that partition alone, so one bad
partition never holds up its node's others. Each is logged when it first fails and when it answers
again."""

from __future__ import annotations

import logging
import time

from broker.errors import RedisUnreachable

logger = logging.getLogger(__name__)

_FIRST_S = 0.5
_CAP_S = 10.0


class Backoff:
    def __init__(self, doing: str) -> None:
        # What the caller was doing, for the log ("visiting partitions", "taking work").
        self._doing = doing
        # By what is backed off: "Redis node <address>" or "partition <number>".
        self._failures: dict[str, int] = {}
        self._until: dict[str, float] = {}

    def wait_s(self, node: str, partition: int) -> float:
        """How long before `partition` on `node` may be tried again (0: now)."""
        now = time.monotonic()
        return max(self._until.get(_node(node), now), self._until.get(_partition(partition), now)) - now

    def failed(self, node: str, partition: int, error: Exception) -> float:
        """The wait before it is tried again: the whole node's when it could not be reached."""
        what = _node(node) if isinstance(error, RedisUnreachable) else _partition(partition)
        failures = self._failures.get(what, 0)
        self._failures[what] = failures + 1
        delay_s = min(_FIRST_S * 2.0**failures, _CAP_S)
        self._until[what] = time.monotonic() + delay_s
        if failures == 0:
            logger.warning("%s failed for %s (partition %d: %s); backing off", self._doing, what, partition, error)
        return delay_s

    def succeeded(self, node: str, partition: int) -> None:
        """Forget the failures of the node and of the partition (logged if there were any)."""
        for what in (_node(node), _partition(partition)):
            self._until.pop(what, None)
            if self._failures.pop(what, 0):
                logger.info("%s: %s answers again", self._doing, what)


def _node(address: str) -> str:
    return f"Redis node {address or '-'}"


def _partition(number: int) -> str:
    return f"partition {number}"
