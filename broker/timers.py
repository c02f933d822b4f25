"""Deadlines and lapses: the scripts that fire them, and the index reads the sweeper makes."""

from __future__ import annotations

from broker.aio import aw
from broker.core import Core
from broker.errors import translate_redis_errors
from broker.layouts import call_args, call_keys, client_args, client_keys


def _ack_text(seconds: float) -> str:
    return f"the client did not acknowledge the call within {seconds:g} s"


def _result_text(seconds: float) -> str:
    return f"the client acknowledged the call but did not answer within {seconds:g} s"


INTERRUPTED_TEXT = "the server tool was interrupted: the worker running it stopped; it was not retried"


class Timers:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def expire_call(self, session_id: str, call_id: str) -> list[str]:
        """Fail the call if its deadline (or, for a server call, its lease) has passed; the work owed."""
        keys, settings = self._core.keys, self._core.settings
        _, owed = await self._core.scripts.run(
            "expire_call",
            call_keys(keys, session_id, call_id),
            [
                *call_args(keys, session_id, call_id, ""),
                _ack_text(settings.ack_timeout_s),
                _result_text(settings.result_timeout_s),
                INTERRUPTED_TEXT,
            ],
        )
        return list(owed)

    async def lapse_client(self, session_id: str, client_id: str) -> list[str]:
        _, owed = await self._core.scripts.run(
            "lapse_client",
            client_keys(self._core.keys, session_id, client_id),
            client_args(self._core.keys, session_id, client_id),
        )
        return list(owed)

    async def due(self, index: str, limit: int, *, older_than_ms: int = 0) -> list[str]:
        """Members of a timer index whose time has come (scores up to now minus `older_than_ms`)."""
        with translate_redis_errors():
            # Redis's clock, not this host's: the scores were written by scripts reading TIME.
            seconds, micros = await aw(self._core.redis.time())
            now = seconds * 1000 + micros // 1000
            raw = await aw(self._core.redis.zrangebyscore(index, "-inf", now - older_than_ms, start=0, num=limit))
        return [bytes(member).decode() for member in raw]

    async def next_due_s(self, indexes: list[str]) -> float | None:
        """Seconds until the earliest member of `indexes` is due (0 if one is), None if all are empty."""
        wait_ms = int(await self._core.scripts.raw("next_due", indexes, []))
        return None if wait_ms < 0 else wait_ms / 1000
