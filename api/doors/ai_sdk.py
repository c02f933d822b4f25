"""The AI SDK's UI message stream (docs/ai-sdk.md): what `DefaultChatTransport` sends in, the session's run
out as UI message chunks (protocol v1).

The frontend's tools (the body's `tools`, an extension the transport's `body` option carries) are the
run's per-turn client tools. A stream ends where the frontend's turn begins (its tools called, or an
approval asked for: `finish` with `tool-calls`), and the resubmitted messages' tool outputs and approval
responses continue the same Switchboard run. A call's client asking the person is a `data-input-request`
part, answered at the input-request route while the stream goes on; a sign-in to an OAuth grant's server
is a `data-mcp-authorization` part.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeAlias

import msgspec

from api.doors import shown
from api.doors.answers import MAX_ANSWERS, result_body
from api.doors.bodies import MAX_MESSAGES, MAX_PARTS, NULL, Bounded, bounded, decode, value
from api.doors.follow import Quiet, SessionGone, shown_items
from api.doors.turns import FrontendTurn, frontend_tools, input_text
from api.doors.view import RunView
from api.schemas.clients import MAX_TOOLS, ClientCallResultBody
from api.state import AppState
from broker.errors import InvalidRequest
from broker.services.live import Subscription
from common.codec import dumps

HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
_SETTLED = ("output-available", "output-error", "output-denied")


class _Approval(msgspec.Struct, gc=False):
    id: str | None = None
    approved: bool | None = None
    reason: str | None = None


class _Part(msgspec.Struct, rename="camel", gc=False):
    type: str = ""
    text: str = ""
    tool_call_id: str | None = None
    tool_name: str | None = None
    state: str | None = None
    provider_executed: bool | None = None
    output: msgspec.Raw = NULL
    error_text: str | None = None
    approval: _Approval | None = None


class _FrontendTool(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    name: str
    description: str = ""
    parameters: msgspec.Raw = NULL


# Each a Bounded list of its own length (the type checker knows them as what they all are).
if TYPE_CHECKING:
    _Messages: TypeAlias = Bounded
    _Tools: TypeAlias = Bounded
    _Parts: TypeAlias = Bounded
else:
    _Messages, _Tools, _Parts = bounded(MAX_MESSAGES), bounded(MAX_TOOLS, _FrontendTool), bounded(MAX_PARTS, _Part)


class _Chat(msgspec.Struct, rename={"message_id": "messageId"}, gc=False):
    """What `DefaultChatTransport` sends (`id`, `messages`, `trigger`, `messageId`), plus `tools`; other
    fields the transport's `body` adds are skipped."""

    id: Annotated[str, msgspec.Meta(max_length=256)]
    messages: _Messages
    trigger: str = "submit-message"
    message_id: str | None = None
    tools: _Tools | None = None


class _UIMessage(msgspec.Struct, gc=False):
    id: Annotated[str, msgspec.Meta(max_length=256)]
    role: str
    parts: _Parts | None = None


def read(body: bytes) -> tuple[FrontendTurn, str | None]:
    """The request as a turn, and the id of the assistant message it continues (None for new input);
    400 naming the field and the rule or limit otherwise. Only the newest message is read: the
    transport sends the whole conversation, and the log has the rest."""
    chat = decode(body, _Chat)
    offered: list[_FrontendTool] = chat.tools.items() if chat.tools else []
    tools = frontend_tools(
        "tools", [{"name": t.name, "description": t.description, "parameters": value(t.parameters)} for t in offered]
    )
    messages: list[msgspec.Raw] = chat.messages.items()
    if not messages:
        return FrontendTurn(None, "", tools, [], []), None
    index = len(messages) - 1
    newest = decode(messages[index], _UIMessage, f"messages.{index}")
    parts: list[_Part] = newest.parts.items() if newest.parts else []
    if newest.role == "user":
        text = input_text(f"messages.{index}.parts", _text(index, parts), [])
        return FrontendTurn(newest.id, text, tools, [], []), None
    if newest.role != "assistant":
        return FrontendTurn(None, "", tools, [], []), None
    results: list[tuple[str, ClientCallResultBody]] = []
    decisions: list[tuple[str, Any]] = []
    known: dict[str, str] = {}
    have: set[str] = set()
    for number, part in enumerate(parts):
        name = _tool_name(part)
        call_id = part.tool_call_id
        if name is None or call_id is None:
            continue
        known[call_id] = name
        if part.state in _SETTLED:
            have.add(call_id)
        answer = _answer(f"messages.{index}.parts.{number}", part)
        if answer is not None:
            results.append((call_id, answer))
        elif part.state == "approval-responded" and part.approval is not None:
            decisions.append(_decision(call_id, part.approval))
        if len(results) > MAX_ANSWERS or len(decisions) > MAX_ANSWERS:
            # Before the rest is read: a message of thousands of outputs is refused for the first past it.
            raise InvalidRequest(
                f"messages.{index}.parts: more than {MAX_ANSWERS} tool results or approval answers; "
                f"the limit is {MAX_ANSWERS}"
            )
    # One UI message per run, named by the run's id, a `step-start` part per step it was shown.
    steps = sum(part.type == "step-start" for part in parts)
    seen = (newest.id.partition(".")[0], steps - 1) if steps else None
    return FrontendTurn(None, "", tools, results, decisions, known, frozenset(have), seen), newest.id


def _tool_name(part: _Part) -> str | None:
    if part.type == "dynamic-tool":
        return part.tool_name or ""
    return part.type.removeprefix("tool-") if part.type.startswith("tool-") else None


def _answer(where: str, part: _Part) -> ClientCallResultBody | None:
    """A frontend tool's output (or error) as its call's result; None for a part that is neither, or a
    call the server ran."""
    if part.provider_executed:
        return None
    if part.state == "output-available":
        return result_body(f"{where}.output", _output(value(part.output)))
    if part.state == "output-error":
        error = part.error_text or "the tool failed"
        return result_body(f"{where}.errorText", error, error)
    return None


def _decision(call_id: str, approval: _Approval) -> tuple[str, dict[str, Any]]:
    decision: dict[str, Any] = {"decision": "allow" if approval.approved else "deny"}
    if not approval.approved and approval.reason:
        decision["message"] = approval.reason
    return approval.id or call_id, decision


def _output(output: Any) -> Any:
    return output if isinstance(output, str) else dumps(output)


def _text(index: int, parts: list[_Part]) -> str:
    texts = []
    for number, part in enumerate(parts):
        if part.type == "text":
            texts.append(part.text)
        elif part.type not in ("step-start", "reasoning") and not part.type.startswith("data-"):
            raise InvalidRequest(f"messages.{index}.parts.{number}: only text parts are taken as input")
    return "\n".join(texts)


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

    def _asked(self, item: shown.InputAsked) -> Iterator[dict[str, Any]]:
        yield input_part(item, {"state": "open"})

    def _input_ended(self, item: shown.InputEnded) -> Iterator[dict[str, Any]]:
        state = "cancelled" if item.reason else "answered"
        ended: dict[str, Any] = {"state": state, "action": item.action, "content": item.content}
        if item.reason:
            ended["reason"] = item.reason
        yield input_part(item.asked, ended)

    def _sign_in(self, item: shown.SignIn) -> Iterator[dict[str, Any]]:
        yield sign_in_part(item)

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
        shown.InputAsked: _asked,
        shown.InputEnded: _input_ended,
        shown.SignIn: _sign_in,
    }


# The data part an input request is shown as; the same part (by its id, the request's) again once it ended.
INPUT_PART = "data-input-request"


def input_part(asked: shown.InputAsked, state: dict[str, Any]) -> dict[str, Any]:
    """An input request as a data part: what it asks (`schema`, or `url`) and where it stands; answered at
    POST /v1/sessions/{sid}/input-requests/{request_id}."""
    data: dict[str, Any] = {
        "request_id": asked.request_id,
        "call_id": asked.call_id,
        "tool": asked.name,
        "message": asked.message,
    }
    if asked.url is not None:
        data["url"] = asked.url
    else:
        data["schema"] = asked.schema
    return {"type": INPUT_PART, "id": asked.request_id, "data": {**data, **state}}


# The data part a sign-in is shown as; the same part (by its id, the sign-in's) again once it ended.
SIGN_IN_PART = "data-mcp-authorization"


def sign_in_part(item: shown.SignIn) -> dict[str, Any]:
    """A sign-in as a data part: `state` `required` with the link to open (`authorization_url`, until
    `expires_at`; declined at POST /v1/sessions/{sid}/mcp-authorizations/{authorization_id}/decline), then
    `completed`, `declined` or `expired`."""
    data: dict[str, Any] = {
        "authorization_id": item.authorization_id,
        "grant": item.grant,
        "server_url": item.server_url,
        "state": item.state,
    }
    if item.state == "required":
        data |= {"authorization_url": item.authorization_url, "expires_at": item.expires_at}
    return {"type": SIGN_IN_PART, "id": item.authorization_id, "data": data}


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
    view: RunView,
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
