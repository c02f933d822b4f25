"""What `switchboard tools serve` (and `tools mcp`) says, from the supervisor and its members alike: plain
lines in the manner of `switchboard up` (`switchboard tools serve: ...`), or one JSON object a line with
`--log-format json`.

Every line worth a program's attention carries its facts as fields (`event`, `tool`, `outcome`,
`duration_ms`, ...): the JSON lines hold them beside the message, the plain lines only in the words.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from broker.services.runs import CLIENT_TOOL_PREFIX
from common.jsonlog import JsonFormatter
from workers.models.aliases import PROVIDER_NAME_LIMIT, shorten

ToolLogFormat = Literal["plain", "json"]
LOG_FORMATS: tuple[ToolLogFormat, ...] = ("plain", "json")
PREFIX = "switchboard tools serve"
# A tool's error text can be a page long; a line shows its start (the model gets all of it).
_DETAIL_CHARS = 200


class PlainFormatter(logging.Formatter):
    """`switchboard tools serve: [member N: ][warning: ][logger: ]message`, one line a record."""

    def __init__(self, member: int | None = None, prefix: str = PREFIX) -> None:
        super().__init__()
        self._member = member
        self._prefix = prefix

    def format(self, record: logging.LogRecord) -> str:
        words = [self._prefix]
        if self._member is not None:
            words.append(f"member {self._member}")
        if record.levelno >= logging.WARNING:
            words.append(record.levelname.lower())
        # Our own records speak for themselves; a library's is named, so its line can be placed.
        if not record.name.startswith("switchboard"):
            words.append(record.name)
        line = ": ".join([*words, record.getMessage()])
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _MemberJson(JsonFormatter):
    def __init__(self, member: int | None) -> None:
        super().__init__()
        self._member = member

    def format(self, record: logging.LogRecord) -> str:
        if self._member is not None and not hasattr(record, "member"):
            record.member = self._member
        return super().format(record)


def configure(fmt: ToolLogFormat, member: int | None = None, prefix: str = PREFIX) -> None:
    """Send every record of this process to stderr in `fmt`; `member` names a pool member's lines, and
    `prefix` starts each plain line (the command's name)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PlainFormatter(member, prefix) if fmt == "plain" else _MemberJson(member))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # A line per request would drown the line per call; httpx2's warnings still show.
    logging.getLogger("httpx2").setLevel(logging.WARNING)


@dataclass(frozen=True)
class VisibleName:
    """A served tool as a run offers it (`client__<client>__<tool>`) and as a model behind a provider
    sees it: the same name, or the alias the provider adapters give a name they cannot take."""

    tool: str
    offered: str
    model_name: str

    def line(self) -> str:
        if self.model_name == self.offered:
            return f"serving {self.tool} as {self.offered}"
        return (
            f"serving {self.tool} as {self.offered}, which the model sees as {self.model_name} "
            f"(names past {PROVIDER_NAME_LIMIT} characters are shortened)"
        )


def visible_names(client_name: str, tools: Iterable[str]) -> list[VisibleName]:
    """The names the model is offered for `tools` served under the registration `client_name`."""
    offered = [(tool, f"{CLIENT_TOOL_PREFIX}{client_name}__{tool}") for tool in tools]
    return [VisibleName(tool, name, shorten(name)) for tool, name in offered]


def duration(seconds: float) -> str:
    return f"{seconds:.2f} s"


def detail(text: str) -> str:
    """A result's or an error's text fit for one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _DETAIL_CHARS else flat[: _DETAIL_CHARS - 3] + "..."
