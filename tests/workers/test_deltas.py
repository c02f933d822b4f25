"""Streamed text reaches live readers even when the step ends while a flush is publishing."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, cast

from broker import Broker
from workers.deltas import FLUSH_EVERY_S, DeltaStream


@dataclass
class _SlowLog:
    """Publishes after a while, as a busy Redis would answer."""

    delay_s: float
    published: list[dict[str, Any]] = field(default_factory=list)

    async def publish_extra(self, session_id: str, payload: bytes) -> None:
        await asyncio.sleep(self.delay_s)
        self.published.append(json.loads(payload))


@dataclass
class _Broker:
    log: _SlowLog


async def test_a_step_ending_while_a_flush_publishes_loses_no_text() -> None:
    log = _SlowLog(delay_s=0.2)
    deltas = DeltaStream(cast(Broker, _Broker(log)), "s", "r", 1)
    deltas.sink("Hello there friend")
    await asyncio.sleep(FLUSH_EVERY_S + 0.05)  # the flush has taken the text and is publishing
    await deltas.close()
    assert "".join(p["delta"] for p in log.published) == "Hello there friend"


async def test_a_step_ending_before_the_flush_publishes_its_text_once() -> None:
    log = _SlowLog(delay_s=0.0)
    deltas = DeltaStream(cast(Broker, _Broker(log)), "s", "r", 1)
    deltas.sink("Hello ")
    deltas.sink("there")
    await deltas.close()
    assert [p["delta"] for p in log.published] == ["Hello there"]
