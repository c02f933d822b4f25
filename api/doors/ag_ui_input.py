"""What an AG-UI frontend sends (a RunAgentInput, protocol 1.0), read as far as the door uses it
(docs/ag-ui.md): the newest message, the newest assistant message and the tool messages after it, the
frontend's tools, its context and its resume answers. Of the older messages only the roles are read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import msgspec

from api.doors.answers import MAX_ANSWERS, result_body
from api.doors.bodies import MAX_MESSAGES, MAX_PARTS, NULL, Bounded, bounded, decode, decode_items, value
from api.doors.turns import FrontendTurn, frontend_tools, input_text
from api.schemas.clients import MAX_TOOLS
from broker.errors import InvalidRequest
from common.events import MAX_RESULT_BLOCKS

# Context entries in one request: each becomes a line of the input, which is bounded as a whole too.
MAX_CONTEXT = 256
# Messages after the newest assistant message: the results of its calls (MAX_ANSWERS at most) and what
# the user wrote since.
MAX_TAIL = 256

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
    _Messages, _Tools, _Context = bounded(MAX_MESSAGES), bounded(MAX_TOOLS), bounded(MAX_CONTEXT)
    _Resume, _Calls = bounded(MAX_ANSWERS), bounded(MAX_PARTS)
    _Parts, _Blocks = bounded(MAX_PARTS), bounded(MAX_RESULT_BLOCKS)

# msgspec names no place for a list past its bound, only the bound: within one struct, each is another.
_LIMITS = {MAX_MESSAGES: "messages", MAX_TOOLS: "tools", MAX_CONTEXT: "context", MAX_ANSWERS: "resume"}
assert len(_LIMITS) == 4


class _Body(msgspec.Struct, rename="camel"):
    """The fields the door reads (`state`, `forwardedProps` and the rest are skipped, never built)."""

    thread_id: str
    run_id: str
    messages: _Messages
    tools: _Tools | None = None
    context: _Context | None = None
    resume: _Resume | None = None


class _Head(msgspec.Struct):
    role: str


class _Function(msgspec.Struct):
    name: str


class _ToolCall(msgspec.Struct):
    id: str
    function: _Function


class _Assistant(msgspec.Struct, rename="camel"):
    id: str
    tool_calls: _Calls | None = None


class _ToolMessage(msgspec.Struct, rename="camel"):
    tool_call_id: str
    content: str | _Blocks
    error: str | None = None


class _Part(msgspec.Struct):
    type: str
    text: str | None = None


class _User(msgspec.Struct):
    id: str
    content: str | _Parts


class _ContextEntry(msgspec.Struct):
    description: str
    value: str


class _ResumeEntry(msgspec.Struct, rename="camel"):
    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: msgspec.Raw = NULL


class _Tool(msgspec.Struct):
    name: str
    description: str
    parameters: msgspec.Raw = NULL


@dataclass(frozen=True, slots=True)
class RunInput:
    """A RunAgentInput as the door takes it: its ids (echoed in RUN_STARTED) and the turn it asks for."""

    thread_id: str
    run_id: str
    turn: FrontendTurn


def read(body: bytes) -> RunInput:
    """The request as a turn; 400 naming the field and the rule or limit otherwise."""
    run = decode(body, _Body, limits=_LIMITS)
    messages = run.messages.items()
    newest_assistant, answers, newest_role = _tail(messages)
    results = []
    for i in answers:
        answer = decode(messages[i], _ToolMessage, f"messages.{i}", {MAX_RESULT_BLOCKS: "content"})
        content = answer.content if isinstance(answer.content, str) else [value(b) for b in answer.content.items()]
        results.append((answer.tool_call_id, result_body(f"messages.{i}.content", content, answer.error)))
    known: dict[str, str] = {}
    seen = None
    if newest_assistant >= 0:
        where = f"messages.{newest_assistant}"
        assistant = decode(messages[newest_assistant], _Assistant, where, {MAX_PARTS: "toolCalls"})
        calls = decode_items(assistant.tool_calls, _ToolCall, f"{where}.toolCalls")
        known = {call.id: call.function.name for call in calls}
        # The door names a step's message `<run id>.<step>`: the newest one is where the frontend is.
        run_id, _, step = assistant.id.rpartition(".")
        if run_id and step.isdigit() and len(step) < 6:
            seen = (run_id, int(step))
    message_id, text = None, ""
    newest = len(messages) - 1
    if newest_role == "user":
        user = decode(messages[newest], _User, f"messages.{newest}", {MAX_PARTS: "content"})
        context = [(entry.description, entry.value) for entry in decode_items(run.context, _ContextEntry, "context")]
        message_id = user.id
        text = input_text(f"messages.{newest}.content", _text(newest, user), context)
    tools = [
        {"name": tool.name, "description": tool.description, "parameters": value(tool.parameters)}
        for tool in decode_items(run.tools, _Tool, "tools")
    ]
    # Tool messages before the newest assistant message answer calls of steps the stream never shows
    # again (it starts after the newest step the frontend has), so only those after it count as had.
    have = frozenset(tool_call_id for tool_call_id, _ in results)
    turn = FrontendTurn(message_id, text, frontend_tools("tools", tools), results, _decisions(run), known, have, seen)
    return RunInput(run.thread_id, run.run_id, turn)


def _tail(messages: list[msgspec.Raw]) -> tuple[int, list[int], str]:
    """Where the newest assistant message is (-1: none), where the tool messages after it are, and the
    newest message's role unless it is that assistant message (else ''), read from the end. The
    frontend sends the whole conversation each time: only what follows its newest assistant message is
    new (its tools' results, a new user message), and nothing before that message is read."""
    answers: list[int] = []
    newest = ""
    for i in range(len(messages) - 1, -1, -1):
        role = decode(messages[i], _Head, f"messages.{i}").role
        if role == "assistant":
            return i, answers[::-1], newest
        newest = newest or role
        if role == "tool":
            answers.append(i)
        if len(answers) > MAX_ANSWERS:
            raise InvalidRequest(
                f"messages: more than {MAX_ANSWERS} tool results after the newest assistant message; "
                f"the limit is {MAX_ANSWERS}"
            )
        if len(messages) - i > MAX_TAIL:
            raise InvalidRequest(
                f"messages: more than {MAX_TAIL:,} messages after the newest assistant message; the limit is {MAX_TAIL}"
            )
    return -1, answers[::-1], newest


def _decisions(run: _Body) -> list[tuple[str, Any]]:
    decisions = []
    for entry in decode_items(run.resume, _ResumeEntry, "resume"):
        payload = value(entry.payload)
        if entry.status == "cancelled":
            payload = {"decision": "deny", "message": "the user cancelled the approval"}
        decisions.append((entry.interrupt_id, payload))
    return decisions


def _text(index: int, message: _User) -> str:
    if isinstance(message.content, str):
        return message.content
    parts = []
    for number, part in enumerate(decode_items(message.content, _Part, f"messages.{index}.content")):
        if part.type != "text" or part.text is None:
            raise InvalidRequest(f"messages.{index}.content.{number}: only text parts are taken as input")
        parts.append(part.text)
    return "\n".join(parts)
