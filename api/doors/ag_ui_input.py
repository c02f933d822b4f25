"""What an AG-UI frontend sends (a RunAgentInput, protocol 1.0), read as far as the door uses it
(docs/ag-ui.md): the newest message, the newest assistant message and the tool messages after it, the
frontend's tools, its context and its resume answers. Of the older messages none is read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import msgspec

from api.doors.answers import MAX_ANSWERS, result_body
from api.doors.bodies import MAX_MESSAGES, MAX_PARTS, NULL, Bounded, Skipped, bounded, decode, value
from api.doors.turns import FrontendTurn, frontend_tools, input_text
from api.schemas.clients import MAX_TOOLS
from broker.errors import InvalidRequest
from common.events.build import MAX_RESULT_BLOCKS

# Context entries in one request: each becomes a line of the input, which is bounded as a whole too.
MAX_CONTEXT = 256
# Messages after the newest assistant message: the results of its calls (MAX_ANSWERS at most) and what
# the user wrote since.
MAX_TAIL = 256
# Tool calls in one assistant message (a model's step holds SWITCHBOARD_MODEL_MAX_CALLS, 1,024 at most).
MAX_TOOL_CALLS = 1_024


class _Function(msgspec.Struct, gc=False):
    name: str


class _ToolCall(msgspec.Struct, gc=False):
    id: str
    function: _Function


class _Part(msgspec.Struct, gc=False):
    type: str
    text: str | None = None


class _ContextEntry(msgspec.Struct, gc=False):
    description: str
    value: str


class _ResumeEntry(msgspec.Struct, rename="camel", gc=False):
    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: msgspec.Raw = NULL


class _Tool(msgspec.Struct, gc=False):
    name: str
    description: str
    parameters: msgspec.Raw = NULL


# Each a Bounded list of its own length (the type checker knows them as what they all are).
if TYPE_CHECKING:
    _Messages: TypeAlias = Bounded
    _Tools: TypeAlias = Bounded
    _Context: TypeAlias = Bounded
    _Resume: TypeAlias = Bounded
    _Calls: TypeAlias = Bounded
    _Parts: TypeAlias = Bounded
    _Blocks: TypeAlias = Bounded
else:
    _Messages, _Tools = bounded(MAX_MESSAGES), bounded(MAX_TOOLS, _Tool)
    _Context, _Resume = bounded(MAX_CONTEXT, _ContextEntry), bounded(MAX_ANSWERS, _ResumeEntry)
    _Calls, _Parts = bounded(MAX_TOOL_CALLS, _ToolCall), bounded(MAX_PARTS, _Part)
    _Blocks = bounded(MAX_RESULT_BLOCKS)


class _Body(msgspec.Struct, rename="camel", gc=False):
    """The fields the door reads (`state`, `forwardedProps` and the rest are skipped, never built)."""

    thread_id: str
    run_id: str
    messages: _Messages
    tools: _Tools | None = None
    context: _Context | None = None
    resume: _Resume | None = None


class _Message(msgspec.Struct, rename="camel", gc=False):
    """A message after the newest assistant one, whatever its role, as far as the door reads one: its
    lists are read past (a tool result's blocks are read again where there are some: `_Results`); then
    held to what its role needs (`_needs`)."""

    role: str
    id: str | None = None
    content: str | Skipped | None = None
    tool_call_id: str | None = None
    error: str | None = None


class _Newest(msgspec.Struct, rename="camel", gc=False):
    """The newest message, as `_Message` but read whole as the input it may be (its parts, if any)."""

    role: str
    id: str | None = None
    content: str | _Parts | None = None
    tool_call_id: str | None = None
    error: str | None = None


class _Assistant(msgspec.Struct, rename="camel", gc=False):
    id: str
    tool_calls: _Calls | None = None


class _Results(msgspec.Struct, gc=False):
    content: _Blocks


@dataclass(frozen=True, slots=True)
class RunInput:
    """A RunAgentInput as the door takes it: its ids (echoed in RUN_STARTED) and the turn it asks for."""

    thread_id: str
    run_id: str
    turn: FrontendTurn


def read(body: bytes) -> RunInput:
    """The request as a turn; 400 naming the field and the rule or limit otherwise."""
    run = decode(body, _Body)
    messages: list[msgspec.Raw] = run.messages.items()
    newest_assistant, tail = _end(messages)
    results = []
    for i, message in tail:
        if message.role == "tool":
            call_id, content = _needs(i, message, "toolCallId", "content")
            if not isinstance(content, str):
                where = f"messages.{i}"
                blocks = decode(messages[i], _Results, where).content.items()
                content = [value(block) for block in blocks]
            results.append((call_id, result_body(f"messages.{i}.content", content, message.error)))
    known: dict[str, str] = {}
    seen = None
    if newest_assistant >= 0:
        where = f"messages.{newest_assistant}"
        assistant = decode(messages[newest_assistant], _Assistant, where)
        calls: list[_ToolCall] = assistant.tool_calls.items() if assistant.tool_calls else []
        known = {call.id: call.function.name for call in calls}
        # The door names a step's message `<run id>.<step>`: the newest one is where the frontend is.
        run_id, _, step = assistant.id.rpartition(".")
        if run_id and step.isdigit() and len(step) < 6:
            seen = (run_id, int(step))
    input_id, text = None, ""
    if tail and tail[-1][1].role == "user":
        i, message = tail[-1]
        input_id, content = _needs(i, message, "id", "content")
        context: list[_ContextEntry] = run.context.items() if run.context else []
        text = input_text(f"messages.{i}.content", _text(i, content), [(c.description, c.value) for c in context])
    tools: list[_Tool] = run.tools.items() if run.tools else []
    offered = [{"name": t.name, "description": t.description, "parameters": value(t.parameters)} for t in tools]
    # Tool messages before the newest assistant message answer calls of steps the stream never shows
    # again (it starts after the newest step the frontend has), so only those after it count as had.
    have = frozenset(call_id for call_id, _ in results)
    entries: list[_ResumeEntry] = run.resume.items() if run.resume else []
    cancelled = frozenset(entry.interrupt_id for entry in entries if entry.status == "cancelled")
    decisions = _decisions(entries)
    turn = FrontendTurn(
        input_id, text, frontend_tools("tools", offered), results, decisions, known, have, seen, cancelled
    )
    return RunInput(run.thread_id, run.run_id, turn)


def _end(messages: list[msgspec.Raw]) -> tuple[int, list[tuple[int, _Message | _Newest]]]:
    """Where the newest assistant message is (-1: there is none) and the messages after it, oldest first,
    each with its place, read from the end. The frontend sends the whole conversation each time: only
    what follows its newest assistant message is new (its tools' results, a new user message), and
    nothing before that message is read."""
    tail: list[tuple[int, _Message | _Newest]] = []
    answers = 0
    for i in range(len(messages) - 1, -1, -1):
        kind: type[_Message | _Newest] = _Newest if i == len(messages) - 1 else _Message
        message = decode(messages[i], kind, f"messages.{i}")
        if message.role == "assistant":
            return i, tail[::-1]
        tail.append((i, message))
        answers += message.role == "tool"
        if answers > MAX_ANSWERS:
            raise InvalidRequest(
                f"messages: more than {MAX_ANSWERS} tool results after the newest assistant message; "
                f"the limit is {MAX_ANSWERS}"
            )
        if len(tail) > MAX_TAIL:
            raise InvalidRequest(
                f"messages: more than {MAX_TAIL:,} messages after the newest assistant message; the limit is {MAX_TAIL}"
            )
    return -1, tail[::-1]


def _needs(index: int, message: _Message | _Newest, *fields: str) -> list[Any]:
    """The fields a message of its role must have (by their names on the wire), in order; 400 naming the
    first it lacks."""
    found = []
    for name in fields:
        held = getattr(message, _ATTRIBUTES[name])
        if held is None:
            raise InvalidRequest(f"messages.{index}.{name}: required for a message of role {message.role!r}")
        found.append(held)
    return found


_ATTRIBUTES = {"id": "id", "content": "content", "toolCallId": "tool_call_id"}


def _decisions(entries: list[_ResumeEntry]) -> list[tuple[str, Any]]:
    """Each resume entry's interrupt and payload; a cancelled approval is denied (a cancelled input
    request is answered `cancel`: FrontendTurn.cancelled)."""
    decisions = []
    for entry in entries:
        payload = value(entry.payload)
        if entry.status == "cancelled":
            payload = {"decision": "deny", "message": "the user cancelled the approval"}
        decisions.append((entry.interrupt_id, payload))
    return decisions


def _text(index: int, content: str | Skipped | Bounded) -> str:
    if isinstance(content, str):
        return content
    assert isinstance(content, Bounded)
    parts = []
    for number, part in enumerate(content.items()):
        if part.type != "text" or part.text is None:
            raise InvalidRequest(f"messages.{index}.content.{number}: only text parts are taken as input")
        parts.append(part.text)
    return "\n".join(parts)
