"""The lines `switchboard tools serve` writes: plain in `up`'s manner or JSON, and the model-visible names."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import pytest

from switchboard.tool_log import PlainFormatter, configure, detail, visible_names
from workers.models.aliases import PROVIDER_NAME_LIMIT, shorten


def _record(
    message: str, level: int = logging.INFO, name: str = "switchboard.tools", **extra: object
) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": name, "levelno": level, "levelname": logging.getLevelName(level)})
    record.msg, record.args = message, None
    record.__dict__.update(extra)
    return record


def test_a_plain_line_is_the_prefix_then_who_then_how_bad_then_the_message() -> None:
    assert PlainFormatter().format(_record("serving work")) == "switchboard tools serve: serving work"
    assert PlainFormatter(2).format(_record("call work: ok")) == "switchboard tools serve: member 2: call work: ok"
    warned = PlainFormatter(1).format(_record("ping failed", logging.WARNING))
    assert warned == "switchboard tools serve: member 1: warning: ping failed"
    # A library's record is named, so its line can be placed.
    assert PlainFormatter().format(_record("gone", logging.ERROR, "asyncio")) == (
        "switchboard tools serve: error: asyncio: gone"
    )


def test_a_plain_line_with_an_exception_carries_its_traceback_below() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("failed", logging.ERROR)
        record.exc_info = sys.exc_info()
    first, *rest = PlainFormatter().format(record).splitlines()
    assert first == "switchboard tools serve: error: failed"
    assert rest[-1] == "ValueError: boom"


@pytest.fixture
def root_logging() -> Iterator[None]:
    """`configure` replaces the root's handlers: pytest's own are put back after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    client_level = logging.getLogger("httpx2").level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        logging.getLogger("httpx2").setLevel(client_level)


@pytest.mark.usefixtures("root_logging")
def test_json_lines_hold_the_facts_and_the_member(capsys: pytest.CaptureFixture[str]) -> None:
    configure("json", member=3)
    facts = {"event": "call", "tool": "work", "outcome": "ok", "duration_ms": 12.5}
    logging.getLogger("switchboard.tools").info("call work: ok in 0.01 s", extra=facts)
    logging.getLogger("httpx2").info("a request line, not shown")
    [line] = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["msg"] == "call work: ok in 0.01 s"
    assert record["level"] == "info"
    assert {name: record[name] for name in facts} == facts
    assert record["member"] == 3


@pytest.mark.usefixtures("root_logging")
def test_plain_lines_go_to_stderr_one_a_record(capsys: pytest.CaptureFixture[str]) -> None:
    configure("plain")
    logging.getLogger("switchboard.tools").info("stopped: drained %d calls", 2, extra={"event": "stopped"})
    assert capsys.readouterr().err == "switchboard tools serve: stopped: drained 2 calls\n"


def test_visible_names_are_the_offered_names_aliased_as_the_providers_alias_them() -> None:
    long_tool = "t" * 60
    short, long = visible_names("pool", ["work", long_tool])
    assert (short.offered, short.model_name) == ("client__pool__work", "client__pool__work")
    assert short.line() == "serving work as client__pool__work"
    assert long.offered == f"client__pool__{long_tool}"
    assert long.model_name == shorten(long.offered) != long.offered
    assert len(long.model_name) <= PROVIDER_NAME_LIMIT
    assert long.line() == (
        f"serving {long_tool} as {long.offered}, which the model sees as {long.model_name} "
        f"(names past {PROVIDER_NAME_LIMIT} characters are shortened)"
    )
    # A name at the limit is the model's as it is.
    [edge] = visible_names("pool", ["t" * (PROVIDER_NAME_LIMIT - len("client__pool__"))])
    assert edge.model_name == edge.offered


def test_a_detail_is_one_line_and_at_most_200_characters() -> None:
    assert detail("ValueError:\n  no such\tinvoice ") == "ValueError: no such invoice"
    cut = detail("x" * 500)
    assert len(cut) == 200
    assert cut.endswith("...")
    assert detail("y" * 200) == "y" * 200
