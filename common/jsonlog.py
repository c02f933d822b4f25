"""Structured logs: one JSON object per line, carrying the ids of the session, run, client and call the
record was written for.

The ids live in a context variable, bound where work enters a process (a request's path in the API, a
job in a worker, a timer the timekeeper fires), so a log call deep in the code names what it was doing
without being handed the ids.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Literal

import orjson

LogFormat = Literal["json", "text"]
IdSource = Callable[[], Mapping[str, str | None]]

# The sources bound in this context, outermost first. A source is read only when a record is formatted,
# so binding one costs a request nothing but a tuple (most requests log nothing).
_sources: contextvars.ContextVar[tuple[IdSource, ...]] = contextvars.ContextVar("switchboard_log_ids", default=())
# The attributes every LogRecord has (and uvicorn's ANSI-coloured copy of its message); whatever else a
# record carries came from `extra=` and is logged.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName", "color_message"}


def push_ids(source: IdSource) -> contextvars.Token[tuple[IdSource, ...]]:
    """Add the ids `source` will give to every record logged in this context; undo with `pop_ids`."""
    return _sources.set((*_sources.get(), source))


def pop_ids(token: contextvars.Token[tuple[IdSource, ...]]) -> None:
    _sources.reset(token)


@contextlib.contextmanager
def log_ids(**ids: str | None) -> Iterator[None]:
    """The ids given, in every record logged inside the block."""
    token = push_ids(lambda: ids)
    try:
        yield
    finally:
        pop_ids(token)


def current_ids() -> dict[str, str]:
    """The ids bound here, inner ones over outer ones; None and '' are left out."""
    found: dict[str, str] = {}
    for source in _sources.get():
        found.update((name, value) for name, value in source().items() if value)
    return found


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "msg", <ids>, <extra>, "exc"?}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(current_ids())
        for name, value in record.__dict__.items():
            if name not in _STANDARD and not name.startswith("_"):
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class _TextIds(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = current_ids()
        return line + "".join(f" {name}={value}" for name, value in ids.items()) if ids else line


def configure(fmt: LogFormat, level: int = logging.INFO) -> None:
    """Send every logger's records to stderr in `fmt`, replacing whatever handlers the root had."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextIds("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
