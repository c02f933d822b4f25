"""The catalogue (common/events/catalogue.py) reads what every builder writes, and writes it back byte for
byte: the declared field order is the order events are written in."""

from __future__ import annotations

import pytest

from common.events import build
from common.events.catalogue import BY_TYPE, SDK_EVENT_TYPES
from common.events.read import UnknownEvent, decode, encode

BODIES = [
    build.message_user("hi", "client"),
    build.message_assistant(
        [build.text_block("a"), build.thinking_block("t", signature="s"), build.tool_call_block("c", "n", {"x": 1})],
        "scripted",
    ),
    build.message_assistant([], None),
    build.tool_call("c1", "client__web__x", {"a": [1, 2]}),
    build.tool_result("c1", "done", is_error=False),
    build.tool_result_blocks("c1", [build.text_block("a"), build.image_block("image/png", "AAAA")], is_error=True),
    build.client_tool_dispatched("cl", "c1", "x", {"a": 1}),
    build.client_tool_dispatched("cl", "c1", "x", {"a": 1}, "mcp"),
    build.approval_requested("c1", "web", "x", {"a": 1}),
    build.approval_requested("c1", "web", "x", {"a": 1}, "mcp"),
    build.step_timing({"scope": "step", "run_id": "r", "step": 0}),
    build.tool_progress("c1", "srv", "t", "half", 0.5),
    build.client_tool_progress("cl", "c1", None, None),
]


@pytest.mark.parametrize("body", BODIES)
def test_each_python_body_reads_and_writes_back_the_same(body: str) -> None:
    assert encode(decode(body)) == body


def test_the_sdk_types_are_the_twenty_the_sdk_knows() -> None:
    assert len(SDK_EVENT_TYPES) == 20
    assert set(BY_TYPE) > SDK_EVENT_TYPES


def test_a_stored_event_reads_with_its_seq_and_time() -> None:
    event = decode(b'{"seq":7,"created_at":"2026-12-06T02:30:00.000000Z","type":"run_queued","run_id":"r"}')
    assert (event.seq, event.created_at, type(event).__name__) == (7, "2026-12-06T02:30:00.000000Z", "RunQueued")


@pytest.mark.parametrize(
    "data",
    [b'{"type":"no_such_event"}', b'{"type":"run_queued"}', b'{"type":"run_queued","run_id":3}', b"[", b""],
)
def test_what_no_declaration_reads_is_refused(data: bytes) -> None:
    with pytest.raises(UnknownEvent):
        decode(data)
