"""What a model step takes (the request) and gives (one assistant turn), and how it fails."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from broker.events import Block
from broker.runs import PlannedCall

if TYPE_CHECKING:
    from workers.catalog import ToolSpec
    from workers.config import RunConfig


class ModelError(Exception):
    """The model call failed for good; the run ends with `run_failed` carrying this message."""


class TransientModelError(ModelError):
    """A failure worth trying again (429, 5xx, a timeout, a dropped connection)."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    call_id: str
    text: str
    is_error: bool


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


# Called with each piece of streamed text as it arrives; `None` means "start again" (a retried attempt).
DeltaSink = Callable[[str | None], None]


class Model(Protocol):
    async def turn(self, request: ModelRequest, on_delta: DeltaSink) -> Turn: ...

    async def aclose(self) -> None: ...
