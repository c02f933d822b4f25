"""Work for the workers: each partition's work stream, read through the consumer group `workers`.

Scripts that owe work (the next step, a server tool call, a run-scoped client to release) append it to
their partition's stream in the same atomic step, and ring the partition's alarm channel with `w`. The
worker that owns the partition takes entries (`take`), each under a claim that beginning the work drops;
a claim that comes due (the worker died or hangs between taking and beginning) hands the entry to a
live worker (`claim`). Members: `s|<sid>|<run>|<step>|<attempt>`, `t|<sid>|<call>`, `d|<sid>|<client>`,
and `n|<sid>|<seq>`, the notice of a notable event (workers/notices.py), done once every consumer of it
succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from broker.core import Core


@dataclass(frozen=True, slots=True)
class Entry:
    """One piece of work taken from a partition's stream."""

    partition: int
    entry_id: str
    kind: Literal["s", "t", "d", "n"]
    session_id: str
    detail: tuple[str, ...]

    @classmethod
    def of(cls, partition: int, entry_id: str, member: str) -> Entry:
        kind, session_id, *detail = member.split("|")
        if kind not in ("s", "t", "d", "n"):
            raise ValueError(f"unknown work entry {member!r}")
        return cls(partition, entry_id, kind, session_id, tuple(detail))  # type: ignore[arg-type]


class Work:
    def __init__(self, core: Core) -> None:
        self._core = core

    def _claim_ms(self) -> int:
        # A taken entry is begun within a round trip or two; past the longer lease its worker is taken for
        # dead (or stuck) and the entry goes to another.
        settings = self._core.settings
        return max(settings.step_lease_ms, settings.server_call_lease_ms)

    async def take(self, partition: int, consumer: str, count: int) -> list[Entry]:
        """Up to `count` new entries of the partition, now `consumer`'s under a claim."""
        reply = await self._core.scripts.run(
            "take_work",
            {},
            {"consumer": consumer, "count": count, "lease_ms": self._claim_ms()},
            partition=self._core.keys.partition(partition),
        )
        return [Entry.of(partition, str(reply[i]), str(reply[i + 1])) for i in range(0, len(reply), 2)]

    async def claim(self, partition: int, consumer: str, entry_id: str) -> Entry | None:
        """Take over an entry whose claim came due, if it still waits to be begun."""
        reply = await self._core.scripts.run(
            "claim_work",
            {},
            {"consumer": consumer, "entry": entry_id, "lease_ms": self._claim_ms()},
            partition=self._core.keys.partition(partition),
        )
        return Entry.of(partition, str(reply[0]), str(reply[1])) if reply else None

    async def done(self, partition: int, entry_id: str) -> None:
        """The entry needs nothing more (a run-scoped client released): acknowledged, deleted, its claim
        dropped."""
        await self._core.scripts.run(
            "done_work", {}, {"entry": entry_id}, partition=self._core.keys.partition(partition)
        )
