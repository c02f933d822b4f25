"""What consumers read events with (common/events/read.py), beside `decode`: a step's timing, an event
passed over, one a service already parsed."""

from __future__ import annotations

import logging

import pytest

from common.codec import dumps
from common.events import build
from common.events.catalogue import Custom, StepTiming, ToolResult
from common.events.read import UnknownEvent, decode, decode_known, from_values, step_timing


def _custom(payload: dict[str, object], kind: str = "timing") -> Custom:
    event = decode(dumps({"type": "custom", "kind": kind, "payload": payload}))
    assert isinstance(event, Custom)
    return event


def test_a_steps_timing_names_its_run_and_step() -> None:
    payload: dict[str, object] = {"scope": "step", "run_id": "r", "step": 2, "attempt": 0, "usage": {"x": 1}}
    assert step_timing(_custom(payload)) == StepTiming("r", 2)


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        ({"scope": "run", "run_id": "r", "outcome": "run_completed", "steps": 1, "total_ms": 9}, "timing"),
        ({"scope": "step", "run_id": "r", "step": 2}, "other"),
        ({"scope": "step", "run_id": "r"}, "timing"),
        ({"scope": "step", "run_id": "r", "step": "2"}, "timing"),
    ],
)
def test_anything_else_is_no_steps_timing(payload: dict[str, object], kind: str) -> None:
    assert step_timing(_custom(payload, kind)) is None


def test_an_event_no_declaration_reads_is_passed_over_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="common.events.read"):
        assert decode_known(b'{"seq":3,"type":"no_such_event"}') is None
    assert "passed over" in caplog.text
    assert decode_known(build.tool_result("c", "done", is_error=False)) == decode(
        build.tool_result("c", "done", is_error=False)
    )


def test_an_event_a_service_parsed_reads_as_the_same_record() -> None:
    body = build.tool_result("c", "no", is_error=True)
    values = {"type": "tool_result", "call_id": "c", "content": [{"type": "text", "data": {"text": "no"}}]}
    event = from_values(values | {"is_error": True})
    assert isinstance(event, ToolResult)
    assert event == decode(body)
    with pytest.raises(UnknownEvent):
        from_values({"type": "tool_result", "call_id": "c"})
