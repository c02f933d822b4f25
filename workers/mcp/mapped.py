"""What an MCP call gives a run: result blocks in the event form and whether it is an error (results.py
maps a server's answer to it; a failure to reach one is `failed`), or, for now, a task to follow or a
request for input (`Interim`, `Working`: workers/mcp/tasks.py reads them). Apart from results.py because
that imports the `mcp` package, which a worker loads only once it connects to a server (hub.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.events.build import MAX_RESULT_CHARS, Block, text_block


@dataclass(frozen=True, slots=True)
class Mapped:
    blocks: list[Block]
    is_error: bool
    # MCP's structuredContent, where the server gave one (within its bound).
    structured: dict[str, Any] | None = None

    def text(self) -> str:
        """The text blocks, one after another (what a text-only reader is given)."""
        return "\n".join(b["data"]["text"] for b in self.blocks if b["type"] == "text")


def failed(text: str) -> Mapped:
    """An error result saying `text` (cut to a result's length)."""
    return Mapped([text_block(text[:MAX_RESULT_CHARS])], True)


@dataclass(frozen=True, slots=True)
class Interim:
    """A tools/call answer that is not the tool's result: a task to follow, or the server asking for input."""

    body: dict[str, Any]

    @property
    def asks(self) -> bool:
        return self.body.get("resultType") == "input_required"


@dataclass(frozen=True, slots=True)
class Working:
    """The task `task_id` is still working: ask again after `poll_s`."""

    task_id: str
    poll_s: float
