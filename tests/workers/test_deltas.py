"""Streamed text and tool input reach live readers in order, even when the step ends while a flush is
publishing."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, cast

from broker import Broker
from workers.deltas import FLUSH_AT_CHARS, FLUSH_EVERY_S, DeltaStream


@dataclass
class _SlowLog:
    """Publishes after a while, as a busy Redis would answer."""

    delay_s: float
    published: list[dict[str, Any]] = field(default_factory=list)

    async def publish_extra(self, session_id: str, payloads: list[str]) -> None:
        await asyncio.sleep(self.delay_s)
        self.published += [json.loads(payload) for payload in payloads]


@dataclass
class _Broker:
    log: _SlowLog


async def test_a_step_ending_while_a_flush_publishes_loses_no_text() -> None:
    log = _SlowLog(delay_s=0.2)
    deltas = DeltaStream(cast(Broker, _Broker(log)), "s", "r", 1)
    deltas.text("Hello there friend")
    await asyncio.sleep(FLUSH_EVERY_S + 0.05)  # the flush has taken the text and is publishing
    await deltas.close()
    assert "".join(p["delta"] for p in log.published) == "Hello there friend"


async def test_a_step_ending_before_the_flush_publishes_its_text_once() -> None:
    log = _SlowLog(delay_s=0.0)
    deltas = DeltaStream(cast(Broker, _Broker(log)), "s", "r", 1)
    deltas.text("Hello ")
    deltas.text("there")
    await deltas.close()
    assert [p["delta"] for p in log.published] == ["Hello there"]


async def test_text_and_each_calls_arguments_go_out_in_order_one_frame_per_run() -> None:
    log = _SlowLog(delay_s=0.0)
    deltas = DeltaStream(cast(Broker, _Broker(log)), "s", "r", 2)
    deltas.text("Let me ")
    deltas.text("look.")
    deltas.tool_input(0, "c1", "client__web__find", '{"q": ')
    deltas.tool_input(0, "c1", "client__web__find", '"x"}')
    deltas.tool_input(1, "c2", "client__web__open", "{}")
    await deltas.close()
    assert log.published == [
        {"type": "message_delta", "run_id": "r", "step": 2, "delta": "Let me look."},
        {"type": "tool_call_delta", "run_id": "r", "step": 2, "call_id": "c1", "index": 0,
         "name": "client__web__find", "delta": '{"q": "x"}'},
        {"type": "tool_call_delta", "run_id": "r", "step": 2, "call_id": "c2", "index": 1,
         "name": "client__web__open", "delta": "{}"},
    ]  # fmt: skip


async def test_a_restart_voids_what_came_before_and_says_so_first() -> None:
    log = _SlowLog(delay_s=0.0)
    deltas = DeltaStream(cast(Broker, _Broker(log)), "s", "r", 1)
    deltas.tool_input(0, "c1", "client__web__find", '{"q"')
    deltas.restart()
    deltas.tool_input(0, "c9", "client__web__find", "{}")
    await deltas.close()
    assert [(p["type"], p.get("reset", False), p["delta"]) for p in log.published] == [
        ("message_delta", True, ""),
        ("tool_call_delta", False, "{}"),
    ]


async def test_a_stream_faster_than_the_ticks_goes_out_in_bounded_messages_in_order() -> None:
    # 2 MiB of text, each piece handed over as a model adapter does (yielding the loop after each), and
    # then the same again in one burst that gives the loop no turn: no message past FLUSH_AT_CHARS, and
    # the text whole and in order.
    log = _SlowLog(delay_s=0.0)
    deltas = DeltaStream(cast(Broker, _Broker(log)), "s", "r", 1)
    pieces = [f"{number:04d}" * 1_024 for number in range(512)]
    for piece in pieces:
        deltas.text(piece)
        await asyncio.sleep(0)
    for piece in pieces:
        deltas.tool_input(0, "c1", "client__web__find", piece)
    await deltas.close()
    text = [p["delta"] for p in log.published if p["type"] == "message_delta"]
    arguments = [p["delta"] for p in log.published if p["type"] == "tool_call_delta"]
    assert ("".join(text), "".join(arguments)) == ("".join(pieces), "".join(pieces))
    assert max(len(json.dumps(p)) for p in log.published) < FLUSH_AT_CHARS + 1_024
    # Text as it came went out well before the step ended, not in one message at the end.
    assert len(text) >= 8
