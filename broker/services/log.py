"""Reading a session's event log: pages by seq in either direction, the head, and the tail after a seq."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.core import Core
from broker.errors import translate_redis_errors


@dataclass(frozen=True, slots=True)
class EventPage:
    """Stored events (JSON bytes, `seq` first) in the page's order, and the cursor of the next page."""

    items: list[bytes]
    next_cursor: int | None


class EventLog:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def head(self, session_id: str) -> int:
        """The seq of the newest event (0 for an empty log)."""
        with translate_redis_errors():
            seq = await self._core.redis.hget(self._core.keys.session(session_id).meta, "seq")
        return int(seq or 0)

    async def after(self, session_id: str, after_seq: int, count: int) -> list[tuple[int, bytes]]:
        """Up to `count` events with seq > `after_seq`, oldest first."""
        key = self._core.keys.session(session_id).events
        with translate_redis_errors():
            rows = await self._core.redis.xrange(key, min=f"{after_seq + 1}-0", max="+", count=count)
        return [(int(entry_id.split(b"-", 1)[0]), fields[b"e"]) for entry_id, fields in rows]

    async def before(self, session_id: str, before_seq: int | None, count: int) -> list[tuple[int, bytes]]:
        """Up to `count` events with seq < `before_seq` (the newest when None), newest first."""
        key = self._core.keys.session(session_id).events
        high = "+" if before_seq is None else f"{before_seq - 1}-0"
        if before_seq is not None and before_seq <= 1:
            return []
        with translate_redis_errors():
            rows = await self._core.redis.xrevrange(key, max=high, min="-", count=count)
        return [(int(entry_id.split(b"-", 1)[0]), fields[b"e"]) for entry_id, fields in rows]

    async def page(
        self,
        session_id: str,
        *,
        ascending: bool,
        limit: int,
        after_seq: int | None,
        before_seq: int | None,
        keep: Callable[[bytes], bool] = lambda _: True,
    ) -> EventPage:
        """One page of `limit` kept events of the window (after_seq, before_seq), both bounds exclusive, in
        the asked order; events `keep` refuses are skipped without shortening the page."""
        low = 1 if after_seq is None else after_seq + 1
        high = None if before_seq is None else before_seq - 1
        key = self._core.keys.session(session_id).events
        kept: list[tuple[int, bytes]] = []
        while len(kept) <= limit and (high is None or low <= high):
            want = limit + 1 - len(kept)
            start, end = f"{low}-0", "+" if high is None else f"{high}-0"
            with translate_redis_errors():
                if ascending:
                    rows = await self._core.redis.xrange(key, min=start, max=end, count=want)
                else:
                    rows = await self._core.redis.xrevrange(key, max=end, min=start, count=want)
            for entry_id, fields in rows:
                if keep(fields[b"e"]):
                    kept.append((int(entry_id.split(b"-", 1)[0]), fields[b"e"]))
            if len(rows) < want:
                break
            last = int(rows[-1][0].split(b"-", 1)[0])
            low, high = (last + 1, high) if ascending else (low, last - 1)
        cursor = kept[limit - 1][0] if len(kept) > limit else None
        return EventPage([data for _, data in kept[:limit]], cursor)

    async def publish_extra(self, session_id: str, payloads: list[str]) -> None:
        """Publish, in order, what live readers may ask for (`?include=deltas`) that the log does not keep."""
        channel = self._core.keys.session(session_id).live
        with translate_redis_errors():
            if len(payloads) == 1:
                await self._core.redis.publish(channel, payloads[0])
                return
            async with self._core.redis.pipeline() as pipe:
                for payload in payloads:
                    pipe.publish(channel, payload)
                await pipe.execute()
