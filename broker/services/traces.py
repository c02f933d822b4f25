"""A traced run's trace context, kept with the run so any worker or API process continues one trace.

Written only when tracing is on: the caller's `traceparent` (the input that started the run), when the run
started, its token counts summed over its steps, and the calls of its last committed step (which the next
step's worker makes `execute_tool` spans of, from the log, once they settled). Plain commands on one key:
each field has one writer at a time (the step holding the run), so nothing here needs a script.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.core import Core
from broker.errors import translate_redis_errors
from common.codec import dumps, loads

# Beyond the longest a run may wait for a client or a person (SWITCHBOARD_MAX_WAIT_S).
_SLACK_S = 86_400
_USAGE = "u:"


@dataclass(frozen=True, slots=True)
class RunTrace:
    """`parent`: the caller's traceparent ('' for none); `start_ns`: when the run started; `usage`: its
    summed token counts; `calls`: the last step's calls (id, name, type) and `after_seq` the log's head
    before they were committed."""

    parent: str = ""
    start_ns: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    after_seq: int = 0

    @classmethod
    def of(cls, raw: dict[bytes, bytes]) -> RunTrace:
        fields = {bytes(k).decode(): bytes(v).decode() for k, v in raw.items()}
        usage = {name.removeprefix(_USAGE): int(value) for name, value in fields.items() if name.startswith(_USAGE)}
        return cls(
            fields.get("parent", ""),
            int(fields.get("start") or 0),
            usage,
            loads(fields["calls"]) if fields.get("calls") else [],
            int(fields.get("seq") or 0),
        )


class Traces:
    def __init__(self, core: Core) -> None:
        self._core = core

    def _key(self, session_id: str, run_id: str) -> str:
        return self._core.keys.session(session_id).trace(run_id)

    @property
    def _ttl_s(self) -> int:
        return int(self._core.settings.max_wait_s) + _SLACK_S

    async def started(self, session_id: str, run_id: str, parent: str, start_ns: int) -> None:
        """The input that starts `run_id` came inside the caller's trace `parent` (a traceparent)."""
        key = self._key(session_id, run_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.hsetnx(key, "parent", parent)
                pipe.hsetnx(key, "start", start_ns)
                pipe.expire(key, self._ttl_s)
                await pipe.execute()

    async def parent(self, session_id: str, run_id: str) -> str:
        """The caller's traceparent the run started in ('' for none)."""
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._key(session_id, run_id), "parent")
        return bytes(raw).decode() if raw else ""

    async def step(self, session_id: str, run_id: str, now_ns: int) -> RunTrace:
        """The run's context as a step begins (its start is now if nothing said otherwise)."""
        key = self._key(session_id, run_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.hsetnx(key, "start", now_ns)
                pipe.expire(key, self._ttl_s)
                pipe.hgetall(key)
                *_, raw = await pipe.execute()
        return RunTrace.of(raw)

    async def committed(
        self, session_id: str, run_id: str, calls: list[dict[str, Any]], after_seq: int, usage: dict[str, int]
    ) -> RunTrace:
        """A step committed `calls` (the log's head was `after_seq` before), counting `usage`; the run's
        context with them."""
        key = self._key(session_id, run_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.hset(key, mapping={"calls": dumps(calls), "seq": after_seq})
                for name, count in usage.items():
                    pipe.hincrby(key, f"{_USAGE}{name}", count)
                pipe.hgetall(key)
                *_, raw = await pipe.execute()
        return RunTrace.of(raw)

    async def ended(self, session_id: str, run_id: str) -> None:
        with translate_redis_errors():
            await self._core.redis.unlink(self._key(session_id, run_id))
