"""The AI SDK's UI message stream (docs/ai-sdk.md): what `DefaultChatTransport` sends in, the session's run
out as UI message chunks (protocol v1).

The frontend's tools (the body's `tools`, an extension the transport's `body` option carries) are the
run's per-turn client tools. A stream ends where the frontend's turn begins (its tools called, or an
approval asked for: `finish` with `tool-calls`), and the resubmitted messages' tool outputs and approval
responses continue the same Switchboard run.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from api.doors import view as shown
from api.doors.follow import Quiet, SessionGone, shown_items
from api.doors.turns import FrontendTurn, frontend_tools, input_text, parsed, result_body
from api.schemas.clients import ClientCallResultBody
from api.state import AppState
from broker.errors import InvalidRequest
from broker.services.live import Subscription
from common.codec import dumps

HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
MAX_TOOLS = 64
_SETTLED = ("output-available", "output-error", "output-denied")


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(max_length=256)
    role: str
    parts: list[dict[str, Any]] = Field(default_factory=list)


class FrontendTool(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


class ChatRequest(BaseModel):
    """What `DefaultChatTransport` sends (`id`, `messages`, `trigger`, `messageId`), plus `tools`; other
    fields the transport's `body` adds are allowed and ignored."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(max_length=256)
    messages: list[UIMessage]
    trigger: str = "submit-message"
    message_id: str | None = Field(default=None, alias="messageId")
    tools: list[FrontendTool] = Field(default_factory=list, max_length=MAX_TOOLS)


def parse(body: bytes) -> ChatRequest:
    """The request as what the transport sends; 400 naming the field otherwise."""
    return parsed(ChatRequest, body)


def _tool_name(part: dict[str, Any]) -> str | None:
    kind = str(part.get("type", ""))
    if kind == "dynamic-tool":
        return str(part.get("toolName", ""))
    return kind.removeprefix("tool-") if kind.startswith("tool-") else None


def plan(chat: ChatRequest) -> tuple[FrontendTurn, str | None]:
    """The request as a turn, and the id of the assistant message it continues (None for new input)."""
    tools = frontend_tools("tools", [tool.model_dump() for tool in chat.tools])
    messages = chat.messages
    newest = messages[-1] if messages else None
    index = len(messages) - 1
    if newest is not None and newest.role == "user":
        text = input_text(f"messages.{index}.parts", _text(index, newest), [])
        return FrontendTurn(newest.id, text, tools, [], []), None
    if newest is None or newest.role != "assistant":
        return FrontendTurn(None, "", tools, [], []), None
    results: list[tuple[str, ClientCallResultBody]] = []
    decisions: list[tuple[str, Any]] = []
    known: dict[str, str] = {}
    have: set[str] = set()
    for number, part in enumerate(newest.parts):
        name = _tool_name(part)
        call_id = part.get("toolCallId")
        if name is None or not isinstance(call_id, str):
            continue
        known[call_id] = name
        state = part.get("state")
        if state in _SETTLED:
            have.add(call_id)
        answer = _answer(f"messages.{index}.parts.{number}", part)
        if answer is not None:
            results.append((call_id, answer))
        elif state == "approval-responded" and isinstance(part.get("approval"), dict):
            decisions.append(_decision(call_id, part["approval"]))
    # One UI message per run, named by the run's id, a `step-start` part per step it was shown.
    steps = sum(part.get("type") == "step-start" for part in newest.parts)
    seen = (newest.id.partition(".")[0], steps - 1) if steps else None
    return FrontendTurn(None, "", tools, results, decisions, known, frozenset(have), seen), newest.id


def _answer(where: str, part: dict[str, Any]) -> ClientCallResultBody | None:
    """A frontend tool's output (or error) as its call's result; None for a part that is neither, or a
    call the server ran."""
    if part.get("providerExecuted"):
        return None
    if part.get("state") == "output-available":
        return result_body(f"{where}.output", _output(part.get("output")))
    if part.get("state") == "output-error":
        error = str(part.get("errorText") or "the tool failed")
        return result_body(f"{where}.errorText", error, error)
    return None


def _decision(call_id: str, approval: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    decision: dict[str, Any] = {"decision": "allow" if approval.get("approved") else "deny"}
    if not approval.get("approved") and approval.get("reason"):
        decision["message"] = str(approval["reason"])
    return str(approval.get("id") or call_id), decision


def _output(value: Any) -> Any:
    return value if isinstance(value, str) else dumps(value)


def _text(index: int, message: UIMessage) -> str:
    parts = []
    for number, part in enumerate(message.parts):
        if part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        elif part.get("type") not in ("step-start", "reasoning") and not str(part.get("type", "")).startswith("data-"):
            raise InvalidRequest(f"messages.{index}.parts.{number}: only text parts are taken as input")
    return "\n".join(parts)


@dataclass
class Chunks:
    """The view's items as UI message chunks. `frontend`: the names of the frontend's tools (their calls
    run in the browser; every other call is one the server ran, `providerExecuted`)."""

    frontend: frozenset[str]

    def _tool(self, name: str) -> dict[str, Any]:
        return {} if name in self.frontend else {"providerExecuted": True, "dynamic": True}

    def of(self, item: shown.Shown) -> Iterator[dict[str, Any]]:
        return self._TABLE[type(item)](self, item)

    def _reasoning(self, item: shown.Reasoning) -> Iterator[dict[str, Any]]:
        yield {"type": "reasoning-start", "id": item.part_id}
        if item.text:
            yield {"type": "reasoning-delta", "id": item.part_id, "delta": item.text}
        yield {"type": "reasoning-end", "id": item.part_id}

    def _started(self, item: shown.ToolStarted) -> Iterator[dict[str, Any]]:
        yield {"type": "tool-input-start", "toolCallId": item.call_id, "toolName": item.name, **self._tool(item.name)}

    def _args(self, item: shown.ToolArgs) -> Iterator[dict[str, Any]]:
        if item.delta:
            yield {"type": "tool-input-delta", "toolCallId": item.call_id, "inputTextDelta": item.delta}

    def _ended(self, item: shown.ToolEnded) -> Iterator[dict[str, Any]]:
        yield {"type": "tool-input-available", "toolCallId": item.call_id, "toolName": item.name,
               "input": item.arguments, **self._tool(item.name)}  # fmt: skip

    def _result(self, item: shown.ShownResult) -> Iterator[dict[str, Any]]:
        extra = self._tool(item.name)
        if item.is_error:
            yield {"type": "tool-output-error", "toolCallId": item.call_id, "errorText": item.text, **extra}
        else:
            yield {"type": "tool-output-available", "toolCallId": item.call_id, "output": item.text, **extra}

    _TABLE: ClassVar[dict[type, Callable[[Chunks, Any], Iterator[dict[str, Any]]]]] = {
        shown.StepStarted: lambda self, i: iter([{"type": "start-step"}]),
        shown.StepFinished: lambda self, i: iter([{"type": "finish-step"}]),
        shown.TextStarted: lambda self, i: iter([{"type": "text-start", "id": i.part_id}]),
        shown.TextDelta: lambda self, i: iter([{"type": "text-delta", "id": i.part_id, "delta": i.delta}]),
        shown.TextEnded: lambda self, i: iter([{"type": "text-end", "id": i.part_id}]),
        shown.Reasoning: _reasoning,
        shown.ToolStarted: _started,
        shown.ToolArgs: _args,
        shown.ToolEnded: _ended,
        shown.ShownResult: _result,
    }


def _ending(item: shown.Paused | shown.RunEnded) -> list[dict[str, Any]]:
    if isinstance(item, shown.Paused):
        requests = [
            {"type": "tool-approval-request", "approvalId": approval.call_id, "toolCallId": approval.call_id}
            for approval in item.approvals
        ]
        return [*requests, {"type": "finish", "finishReason": "tool-calls"}]
    if item.outcome == "failed":
        return [{"type": "error", "errorText": item.error or "the run failed"}]
    if item.outcome == "cancelled":
        return [{"type": "abort", "reason": "the run was cancelled"}]
    return [{"type": "finish", "finishReason": "stop"}]


def _frame(chunk: dict[str, Any]) -> bytes:
    return b"data: %s\n\n" % dumps(chunk).encode()


async def stream(
    state: AppState,
    session_id: str,
    after: int,
    message_id: str,
    view: shown.RunView,
    chunks: Chunks,
    subscription: Subscription,
    on_pause: Callable[[shown.Paused], Any],
) -> AsyncGenerator[bytes, None]:
    """`start`, the run from `after` until the frontend's turn or the run's end, then `[DONE]`."""
    try:
        yield _frame({"type": "start", "messageId": message_id})
        async for item in shown_items(state, session_id, after, view, subscription):
            if isinstance(item, Quiet):
                yield b": keep-alive\n\n"
            elif isinstance(item, shown.Paused | shown.RunEnded):
                if isinstance(item, shown.Paused):
                    await on_pause(item)
                yield b"".join([*(_frame(c) for c in _ending(item)), b"data: [DONE]\n\n"])
                return
            else:
                yield b"".join(_frame(chunk) for chunk in chunks.of(item))
    except SessionGone:
        yield _frame({"type": "error", "errorText": "the session was deleted, or the server is restarting"})
        yield b"data: [DONE]\n\n"
    finally:
        state.hub.unsubscribe(subscription)
