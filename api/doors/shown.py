"""What a run view shows (api/doors/view.py), in the neutral terms both front doors translate: steps, text
as it streams, reasoning, tool calls and their results, input requests, sign-ins to a grant's server, and
where the frontend's turn begins (`Paused`) or the run ends (`RunEnded`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class StepStarted:
    step: int


@dataclass(frozen=True, slots=True)
class StepFinished:
    step: int


@dataclass(frozen=True, slots=True)
class TextStarted:
    """A run of text in the step's assistant message (`message_id`); `part_id` names this run of it."""

    message_id: str
    part_id: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    message_id: str
    part_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class TextEnded:
    message_id: str
    part_id: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    """The model's thinking, whole (it is not streamed)."""

    message_id: str
    part_id: str
    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    call_id: str
    name: str
    message_id: str


@dataclass(frozen=True, slots=True)
class ToolArgs:
    call_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class ToolEnded:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ShownResult:
    call_id: str
    name: str
    text: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class Approval:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class InputAsked:
    """An input request of a call of the run (`input_requested`): a form (`schema`) or a page (`url`)."""

    request_id: str
    call_id: str
    name: str
    message: str
    schema: dict[str, Any] | None
    url: str | None


@dataclass(frozen=True, slots=True)
class InputEnded:
    """An input request shown (`asked`) ended: answered (`action`, with `content` for accept), or with its
    call (`reason`)."""

    asked: InputAsked
    action: str
    content: dict[str, Any] | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class SignIn:
    """A sign-in to an OAuth grant's MCP server the session asked of the person (`state` `required`: open
    `authorization_url` until `expires_at`), or how it ended (`completed`, `declined`, `expired`). It is not
    the frontend's turn: the step waits on it while the stream goes on."""

    authorization_id: str
    grant: str
    server_url: str
    state: str
    authorization_url: str | None = None
    expires_at: str | None = None


@dataclass(frozen=True, slots=True)
class Paused:
    """The frontend's turn: the step's calls of its own tools (`calls`, to answer in its next request),
    the approvals it asked for (`approvals`) and the input requests a call's client made (`inputs`). The
    stream ends here; the run waits."""

    step: int
    calls: tuple[str, ...]
    approvals: tuple[Approval, ...]
    inputs: tuple[InputAsked, ...] = ()


@dataclass(frozen=True, slots=True)
class RunEnded:
    """`outcome`: completed, failed or cancelled; `error` says why a run failed."""

    run_id: str
    outcome: str
    error: str = ""


Shown = (
    StepStarted
    | StepFinished
    | TextStarted
    | TextDelta
    | TextEnded
    | Reasoning
    | ToolStarted
    | ToolArgs
    | ToolEnded
    | ShownResult
    | InputAsked
    | InputEnded
    | SignIn
    | Paused
    | RunEnded
)
