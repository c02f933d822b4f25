"""What a worker holds of its MCP servers' answers while it reads them, across all its connections.

Each bound on what one exchange may read (workers/mcp/wire.py) is per exchange, and a worker may hold 64
connections of many exchanges each: a version's 32 grants at 32 URLs of one hostile host would multiply
them into gigabytes. So every message being read (a JSON body, or one event of an event stream: the part
the `mcp` client keeps until it is whole) is charged to one budget of the worker, `WORKER_ANSWER_BYTES`,
as it arrives, and given back once the message is whole (the client then parses it, one message at a
time, and lets it go). A chunk that would pass the budget fails its exchange (the call gets an error
result saying so; a standing stream is opened again), so nothing waits for room another holds.

A message is also held to `MAX_VALUES` JSON values as it arrives (workers/mcp/scan.py), since parsing one
costs up to about 330 bytes a value whatever its size: so one message's parse takes at most about
`3 x its bytes + 33 MB`."""

from __future__ import annotations

import itertools

from workers.bounded_stream import EventEnds
from workers.mcp.scan import JsonValues

# Bytes of answers being read that a worker holds at once, across all its connections: a call's answer
# is at most 16 MiB, so two of the largest fit (and any number of ordinary ones).
WORKER_ANSWER_BYTES = 32 * 1024 * 1024
# JSON values in one message: a page of 256 tools with their schemas holds a few tens of thousands.
MAX_VALUES = 100_000


class Refused(Exception):
    """What was read passed a bound; `message` says which."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Budget:
    """The worker's bytes of answers in flight (see the module's docstring)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = WORKER_ANSWER_BYTES if limit is None else limit
        self.held = 0
        self.peak = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.limit:
            return False
        self.held += size
        self.peak = max(self.peak, self.held)
        return True

    def give(self, size: int) -> None:
        self.held -= size


class Reading:
    """One exchange's answer as it is read: each message's bytes (within `message_limit`, and charged to
    the budget until the message is whole) and its JSON values. `events`: the answer is an event stream,
    whose messages are its events; else it is one message."""

    def __init__(self, budget: Budget, *, message_limit: int, events: bool) -> None:
        self._budget = budget
        self._limit = message_limit
        self._ends = EventEnds(every=True) if events else None
        self._size = 0
        self._values = JsonValues()

    def feed(self, chunk: bytes) -> list[int]:
        """Count a chunk; the offsets in it just past each event it ended. Raises `Refused` past a bound."""
        ends = self._ends.feed(chunk) if self._ends is not None else []
        if not ends:
            self._grow(chunk)
            return ends
        self._grow(chunk[: ends[0]])
        self._whole()
        # Whole events between, each no larger than all of them together: looked at one by one only if
        # together they pass a bound (a chunk is 64 KiB, so they do not).
        middle = chunk[ends[0] : ends[-1]]
        if len(middle) > self._limit or (middle and JsonValues().feed(middle) > MAX_VALUES):
            for start, end in itertools.pairwise(ends):
                self._grow(chunk[start:end])
                self._whole()
        self._grow(chunk[ends[-1] :])
        return ends

    def _grow(self, part: bytes) -> None:
        if not part:
            return
        if self._size + len(part) > self._limit:
            raise Refused(f"the MCP server's answer passed {self._limit:,} bytes")
        if self._values.feed(part) and self._values.count > MAX_VALUES:
            raise Refused(f"the MCP server's answer passed {MAX_VALUES:,} JSON values")
        if not self._budget.take(len(part)):
            held = self._budget.limit // (1024 * 1024)
            raise Refused(f"this worker holds {held} MiB of MCP servers' answers in flight already; try again later")
        self._size += len(part)

    def _whole(self) -> None:
        self._budget.give(self._size)
        self._size = 0
        self._values = JsonValues()

    def close(self) -> None:
        """Give back what the message being read holds (the exchange ended)."""
        self._budget.give(self._size)
        self._size = 0
