"""What a model step takes (the transcript) and gives (one assistant turn), and how it fails."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from broker.events import Block
from broker.runs import PlannedCall


class ModelError(Exception):
    """The model call failed for good; the run ends with `run_failed` carrying this message."""


class StepCancelled(Exception):
    """A cancel was seen at a checkpoint; the run ends with `run_cancelled`."""


# Raises StepCancelled when the run was cancelled; models call it while they wait.
Checkpoint = Callable[[], Awaitable[None]]


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
class Turn:
    """What one model step produced: the assistant message's blocks and the tool calls among them."""

    content: list[Block]
    calls: list[PlannedCall]
    model: str | None


class Model(Protocol):
    async def turn(self, transcript: list[Message], checkpoint: Checkpoint) -> Turn: ...
