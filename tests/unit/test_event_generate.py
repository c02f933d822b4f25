"""Everything derived from the event catalogue is what the catalogue gives (so CI fails on drift), and the
byte marks derived from it pick out the events they name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from api.sse import shown
from common.events import build, marks
from common.events.catalogue import (
    ApprovalResolved,
    ClientToolProgress,
    ClientToolWaiting,
    Custom,
    ToolCallDelta,
    ToolResult,
)
from common.events.generate import COPIES, ROOT, drifted, main
from common.events.read import encode


def test_every_derived_copy_is_what_the_catalogue_gives() -> None:
    assert drifted() == [], "run `python -m common.events.generate` and commit what it writes"


def test_the_check_names_each_copy_that_drifted_and_fails(tmp_path: Path) -> None:
    for copy in COPIES:
        (tmp_path / copy.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / copy.path, tmp_path / copy.path)
    assert drifted(tmp_path) == []
    edited = tmp_path / COPIES[0].path
    edited.write_text(edited.read_text().replace("client_tool_acked", "client_tool_akced"))
    assert drifted(tmp_path) == [COPIES[0].path]
    assert main(["--check"]) == 0


def _stored(body: str, seq: int = 12) -> bytes:
    return f'{{"seq":{seq},"created_at":"2026-12-06T02:30:00.123456Z",{body[1:]}'.encode()


def test_the_marks_are_the_declared_type_and_first_field() -> None:
    assert marks.type_mark(ToolResult) == b'"type":"tool_result"'
    assert marks.first_field_mark(Custom, "kind", "timing") == b'"type":"custom","kind":"timing"'
    with pytest.raises(ValueError, match="not the first declared field"):
        marks.first_field_mark(Custom, "payload", {})
    with pytest.raises(ValueError, match="not the first declared field"):
        marks.first_field_mark(ApprovalResolved, "decision", "allow")


def test_the_matchers_pick_out_what_they_name_and_nothing_else() -> None:
    timing = _stored(build.step_timing({"scope": "step"}), seq=10**15)
    progress = _stored(build.client_tool_progress("c", "call", "half", 0.5))
    server = _stored(build.tool_progress("call", "srv", "t", None, None))
    images = _stored(build.tool_result_blocks("c", [build.image_block("image/png", "AAAA")], is_error=False))
    # A string holding a mark's text is escaped inside the JSON, so it cannot pass for one.
    text = _stored(build.tool_result("c", '"type":"image" "type":"custom","kind":"timing"', is_error=False))
    assert [marks.is_timing(e) for e in (timing, progress, text)] == [True, False, False]
    assert [marks.is_progress(e) for e in (progress, server, timing)] == [True, True, False]
    assert [marks.has_images(e) for e in (images, text)] == [True, False]
    assert marks.of_type(images, ToolResult)
    assert not marks.of_type(progress, ToolResult)
    assert marks.is_logged(timing)
    assert marks.event_seq(timing) == 10**15


def test_a_thinking_delta_goes_only_to_a_reader_that_asked_for_thinking() -> None:
    thinking = b'{"type":"thinking_delta","run_id":"r","step":0,"delta":"hm"}'
    delta = encode(ToolCallDelta(run_id="r", step=0, call_id="c", index=0, name="n", delta="{")).encode()
    assert not marks.is_logged(thinking)
    assert marks.extra_shown(delta, frozenset({"deltas"}))
    assert not marks.extra_shown(delta, frozenset())
    assert not marks.extra_shown(thinking, frozenset({"deltas"}))
    assert marks.extra_shown(thinking, frozenset({"deltas", "thinking"}))
    assert not marks.extra_shown(thinking, frozenset({"thinking"}))
    assert marks.of_type(
        encode(ClientToolProgress(client_id="c", call_id="x", message=None, fraction=None)).encode(), ClientToolProgress
    )


def test_a_call_waiting_for_its_client_goes_only_to_a_reader_that_asked_for_extensions() -> None:
    body = encode(
        ClientToolWaiting(
            call_id="c",
            tool="t",
            client_name="web",
            since="2026-12-06T02:30:00Z",
            deadline="2026-12-07T02:30:00Z",
            run_id=None,
        )
    )
    waiting = _stored(body)
    progress = _stored(build.client_tool_progress("c", "call", "half", 0.5))
    # A string holding the mark's text is escaped inside the JSON, so it cannot pass for one.
    forged = _stored(build.tool_result("c", '"type":"client_tool_waiting"', is_error=False))
    assert [marks.is_extension(e) for e in (waiting, progress, forged)] == [True, False, False]
    assert not shown(waiting, frozenset())
    assert not shown(waiting, frozenset({"progress"}))
    assert shown(waiting, frozenset({"extensions"}))
    assert shown(forged, frozenset())
