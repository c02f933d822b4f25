"""Log lines are one JSON object each, carrying the ids bound where the work entered the process."""

from __future__ import annotations

import asyncio
import json
import logging
import sys

from api.app import path_ids
from common.jsonlog import JsonFormatter, current_ids, log_ids


def record(message: str, **extra: object) -> logging.LogRecord:
    entry = logging.LogRecord("switchboard.test", logging.WARNING, __file__, 1, message, (), None)
    entry.__dict__.update(extra)
    return entry


def test_a_line_carries_the_bound_ids_and_extras_but_not_the_record_internals() -> None:
    with log_ids(session_id="s1", run_id="r1", client_id=None):
        line = JsonFormatter().format(record("step %s gave up", attempt=3, color_message="\x1b[1m"))
    entry = json.loads(line)
    assert entry["msg"] == "step %s gave up"
    assert entry["level"] == "warning"
    assert entry["logger"] == "switchboard.test"
    assert (entry["session_id"], entry["run_id"], entry["attempt"]) == ("s1", "r1", 3)
    assert "client_id" not in entry
    assert "color_message" not in entry
    assert "args" not in entry


def test_an_exception_is_one_field_of_the_same_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        entry = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = JsonFormatter().format(entry)
    assert "\n" not in line
    assert "ValueError: boom" in json.loads(line)["exc"]


async def test_ids_stay_with_their_task_and_end_with_their_block() -> None:
    async def work(sid: str) -> dict[str, str]:
        with log_ids(session_id=sid):
            await asyncio.sleep(0)
            return current_ids()

    assert list(await asyncio.gather(work("a"), work("b"))) == [{"session_id": "a"}, {"session_id": "b"}]
    assert current_ids() == {}


def test_a_path_names_its_session_client_and_call() -> None:
    assert path_ids("/v1/sessions/S/clients/C/calls/K/ack") == {"session_id": "S", "client_id": "C", "call_id": "K"}
    assert path_ids("/v1/sessions/S/clients/C/calls/stream") == {"session_id": "S", "client_id": "C"}
    assert path_ids("/v1/sessions/S/events") == {"session_id": "S"}
