"""Per-partition backoff: a partition whose Redis node does not answer is tried again later and later
(half a second, doubling, at most ten), while the others go on."""

from __future__ import annotations

_FIRST_S = 0.5
_CAP_S = 10.0


class Backoff:
    def __init__(self) -> None:
        self._failures: dict[int, int] = {}

    def failed(self, partition: int) -> tuple[float, bool]:
        """The wait before `partition` is tried again, and whether this is the first failure in a row
        (the one worth a log line)."""
        failures = self._failures.get(partition, 0)
        self._failures[partition] = failures + 1
        return min(_FIRST_S * 2**failures, _CAP_S), failures == 0

    def succeeded(self, partition: int) -> bool:
        """Forget the partition's failures; whether it had any."""
        return self._failures.pop(partition, 0) > 0
