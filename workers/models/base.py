"""What a model step takes (the request) and gives (one assistant turn), and how it fails."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from broker.services.runs import PlannedCall
from common.events import Block, text_block, thinking_block, tool_call_block

if TYPE_CHECKING:
    from workers.config import RunConfig


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: the model-visible name, its description, its JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


# What of a provider's own text reaches run_failed: its error message, cut to this many characters (an
# error body can be of any size, and the rest of it is the provider's business, not the session's).
MESSAGE_LIMIT = 500


def provider_text(value: object, fallback: str, limit: int = MESSAGE_LIMIT) -> str:
    """A message or code a provider sent, as run_failed shows it: text only, at most `limit` characters
    (and an ellipsis); `fallback` when it sent none."""
    if not isinstance(value, str) or not value.strip():
        return fallback
    return value if len(value) <= limit else value[:limit] + "…"


class ModelError(Exception):
    """The model call failed for good; the run ends with `run_failed` carrying this message."""


class TransientModelError(ModelError):
    """A failure worth trying again (429, 5xx, a timeout, a dropped connection)."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    call_id: str
    text: str
    is_error: bool
    # Images a client returned with the text: (media type, base64 data) each.
    images: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of the conversation as the model sees it."""

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    content: list[Block] = field(default_factory=list)
    calls: list[PlannedCall] = field(default_factory=list)
    result: ToolOutcome | None = None


@dataclass(frozen=True, slots=True)
class ModelRequest:
    config: RunConfig
    transcript: list[Message]
    tools: list[ToolSpec]


@dataclass(frozen=True, slots=True)
class Turn:
    """What one model step produced: the assistant message's blocks and the tool calls among them."""

    content: list[Block]
    calls: list[PlannedCall]
    model: str | None


class TurnBuilder:
    """Assembles a turn's blocks in order; a tool call adds its block and its planned call together."""

    def __init__(self) -> None:
        self.content: list[Block] = []
        self.calls: list[PlannedCall] = []

    def text(self, text: str) -> None:
        if text:
            self.content.append(text_block(text))

    def thinking(self, thinking: str, *, redacted: bool = False, signature: str | None = None) -> None:
        self.content.append(thinking_block(thinking, redacted=redacted, signature=signature))

    def call(self, call_id: str, name: str, arguments: dict[str, Any], invalid: str = "") -> None:
        self.calls.append(PlannedCall(call_id, name, arguments, invalid))
        self.content.append(tool_call_block(call_id, name, arguments))

    def turn(self, model: str | None) -> Turn:
        return Turn(self.content, self.calls, model)


class DeltaSink(Protocol):
    """Where a model sends what it streams, as it arrives: text, and each tool call's arguments."""

    def text(self, piece: str) -> None: ...

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        """A fragment of the arguments of the turn's `index`-th tool call (from 0), `name` the tool's
        model-visible name (never a provider alias)."""

    def restart(self) -> None:
        """What was streamed so far is void (a failed attempt that will be tried again)."""


class Model(Protocol):
    async def turn(self, request: ModelRequest, deltas: DeltaSink) -> Turn: ...

    async def aclose(self) -> None: ...
