"""AG-UI (docs/ag-ui.md): a RunAgentInput in, the session's run out as AG-UI events.

The request is read in api/doors/ag_ui_input.py. The frontend's tools are the run's per-turn client
tools. An AG-UI run ends where the frontend's turn begins (its tools called: `RUN_FINISHED` naming the
pending calls; an approval asked for, or a call's client asking the person: an interrupt), and the next
RunAgentInput's tool messages and `resume` answers continue the same Switchboard run.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.core.events import RunFinishedCancelledOutcome, RunFinishedInterruptOutcome, RunFinishedSuccessOutcome
from pydantic import TypeAdapter

from api.doors import ag_ui_proto, shown
from api.doors.follow import Quiet, SessionGone, back, shown_items
from api.doors.input_answers import answer_schema
from api.doors.turns import Started, hand_over
from api.doors.view import RunView, result_text
from api.schemas.events import ApprovalDecisionForm
from api.state import AppState
from broker.services.live import Subscription
from common.codec import dumps
from common.events.catalogue import MessageAssistant, MessageUser, TextBlock, ToolCallBlock, ToolResult
from common.events.read import decode_known

PROTOCOL_VERSION = "1.0"
# The interrupt an approval becomes: what `resume[].payload` answers with (the approvals route's body).
APPROVAL_REASON = "tool_approval"
DECISION_SCHEMA: dict[str, Any] = TypeAdapter(ApprovalDecisionForm).json_schema()
# The interrupt an input request becomes (a client of a call asking the person: docs/ag-ui.md).
INPUT_REASON = "input_request"


@dataclass
class Encoder:
    """AG-UI events as SSE frames, or in AG-UI's binary encoding for a client whose `Accept` asks for it."""

    proto: bool = False

    @classmethod
    def for_accept(cls, accept: str) -> Encoder:
        return cls(proto=ag_ui_proto.MEDIA_TYPE in accept)

    @property
    def media_type(self) -> str:
        return ag_ui_proto.MEDIA_TYPE if self.proto else "text/event-stream"

    def encode(self, events: list[BaseEvent]) -> bytes:
        if self.proto:
            return b"".join(ag_ui_proto.encode_event(event) for event in events)
        return b"".join(b"data: %s\n\n" % event.model_dump_json(by_alias=True).encode() for event in events)

    def keep_alive(self) -> bytes:
        # The binary encoding has no comment frame: a quiet binary stream sends nothing (TCP keeps it).
        return b"" if self.proto else b": keep-alive\n\n"


def _reasoning(item: shown.Reasoning) -> Iterator[BaseEvent]:
    yield ReasoningStartEvent(message_id=item.part_id)
    yield ReasoningMessageStartEvent(message_id=item.part_id)
    if item.text:
        yield ReasoningMessageContentEvent(message_id=item.part_id, delta=item.text)
    yield ReasoningMessageEndEvent(message_id=item.part_id)
    yield ReasoningEndEvent(message_id=item.part_id)


def _args(item: shown.ToolArgs) -> Iterator[BaseEvent]:
    if item.delta:
        yield ToolCallArgsEvent(tool_call_id=item.call_id, delta=item.delta)


_TRANSLATIONS: dict[type, Callable[[Any], Iterator[BaseEvent]]] = {
    shown.StepStarted: lambda i: iter([StepStartedEvent(step_name=f"step {i.step}")]),
    shown.StepFinished: lambda i: iter([StepFinishedEvent(step_name=f"step {i.step}")]),
    shown.TextStarted: lambda i: iter([TextMessageStartEvent(message_id=i.message_id, role="assistant")]),
    shown.TextDelta: lambda i: iter([TextMessageContentEvent(message_id=i.message_id, delta=i.delta)]),
    shown.TextEnded: lambda i: iter([TextMessageEndEvent(message_id=i.message_id)]),
    shown.Reasoning: _reasoning,
    shown.ToolStarted: lambda i: iter(
        [ToolCallStartEvent(tool_call_id=i.call_id, tool_call_name=i.name, parent_message_id=i.message_id)]
    ),
    shown.ToolArgs: _args,
    shown.ToolEnded: lambda i: iter([ToolCallEndEvent(tool_call_id=i.call_id)]),
    shown.ShownResult: lambda i: iter(
        [ToolCallResultEvent(message_id=f"{i.call_id}.result", tool_call_id=i.call_id, content=i.text, role="tool")]
    ),
    # This door's view pauses on an input request (an interrupt): it shows neither of these.
    shown.InputAsked: lambda i: iter(()),
    shown.InputEnded: lambda i: iter(()),
    shown.SignIn: lambda i: iter([sign_in_event(i)]),
}


# The CUSTOM event a sign-in becomes: this prefix and the session event's type (docs/ag-ui.md).
SIGN_IN_PREFIX = "switchboard.mcp_authorization_"


def sign_in_event(item: shown.SignIn) -> CustomEvent:
    """A sign-in as a CUSTOM event: `..._required` with the link to open (`authorization_url`, until
    `expires_at`), `..._completed`, or `..._declined` (`reason`: `declined` or `expired`)."""
    value: dict[str, Any] = {
        "authorization_id": item.authorization_id,
        "grant": item.grant,
        "server_url": item.server_url,
    }
    if item.state == "required":
        value |= {"authorization_url": item.authorization_url, "expires_at": item.expires_at}
        return CustomEvent(name=SIGN_IN_PREFIX + "required", value=value)
    if item.state == "completed":
        return CustomEvent(name=SIGN_IN_PREFIX + "completed", value=value)
    return CustomEvent(name=SIGN_IN_PREFIX + "declined", value={**value, "reason": item.state})


def translate(item: shown.Shown) -> Iterator[BaseEvent]:
    """One thing the run view shows, as AG-UI events (RUN_FINISHED and RUN_ERROR are the stream's)."""
    return _TRANSLATIONS[type(item)](item)


def input_interrupt(asked: shown.InputAsked) -> Interrupt:
    """The interrupt an input request becomes: `resume[].payload` is the input-request route's answer body,
    whose `content` is the request's form; a page to visit is in `metadata.url`."""
    metadata: dict[str, Any] = {"call_id": asked.call_id, "tool": asked.name}
    if asked.url is not None:
        metadata["url"] = asked.url
    return Interrupt(
        id=asked.request_id,
        reason=INPUT_REASON,
        message=asked.message,
        tool_call_id=asked.call_id,
        response_schema=answer_schema(asked.schema),
        metadata=metadata,
    )


def finished(thread_id: str, run_id: str, item: shown.Paused | shown.RunEnded) -> BaseEvent:
    if isinstance(item, shown.Paused):
        if item.approvals or item.inputs:
            interrupts = [
                Interrupt(
                    id=approval.call_id,
                    reason=APPROVAL_REASON,
                    message=f"Allow {approval.name} with {dumps(approval.arguments)}?",
                    tool_call_id=approval.call_id,
                    response_schema=DECISION_SCHEMA,
                )
                for approval in item.approvals
            ]
            interrupts += [input_interrupt(asked) for asked in item.inputs]
            return RunFinishedEvent(
                thread_id=thread_id, run_id=run_id, outcome=RunFinishedInterruptOutcome(interrupts=interrupts)
            )
        outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=list(item.calls))
        return RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=outcome)
    if item.outcome == "failed":
        return RunErrorEvent(message=item.error or "the run failed", code="run_failed")
    if item.outcome == "cancelled":
        return RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=RunFinishedCancelledOutcome())
    return RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=RunFinishedSuccessOutcome())


async def stream(
    state: AppState,
    session_id: str,
    thread_id: str,
    run_id: str,
    started: Started | None,
    view: RunView | None,
    subscription: Subscription,
    encoder: Encoder,
) -> AsyncGenerator[bytes, None]:
    """The AG-UI run: RUN_STARTED, then the Switchboard run from `started` until the frontend's turn or
    the run's end; with nothing to follow (`started` None), the conversation as a MESSAGES_SNAPSHOT."""
    try:
        yield encoder.encode([RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION)])
        if started is None or view is None:
            snapshot = MessagesSnapshotEvent(messages=await history(state, session_id))
            end = RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=RunFinishedSuccessOutcome())
            yield encoder.encode([snapshot, end])
            return
        async for item in shown_items(state, session_id, started.after, view, subscription):
            if isinstance(item, Quiet):
                yield encoder.keep_alive()
            elif isinstance(item, shown.Paused | shown.RunEnded):
                if isinstance(item, shown.Paused):
                    await hand_over(state, session_id, view.frontend, item.calls)
                yield encoder.encode([finished(thread_id, run_id, item)])
                return
            else:
                yield encoder.encode(list(translate(item)))
    except SessionGone:
        gone = RunErrorEvent(message="the session was deleted, or the server is restarting", code="session_gone")
        yield encoder.encode([gone])
    finally:
        state.hub.unsubscribe(subscription)


async def history(state: AppState, session_id: str) -> list[Any]:
    """The conversation as AG-UI messages, from as much of the newest log as a look back reads."""
    events = [event async for event in _history_events(state, session_id)]
    messages: list[Any] = []
    for event in reversed(events):
        match event:
            case MessageUser():
                messages.append(UserMessage(id=f"sb-{event.seq}", content=result_text(event.message.content)))
            case MessageAssistant():
                blocks = event.message.content
                text = "".join(block.data.text for block in blocks if isinstance(block, TextBlock))
                calls = [
                    ToolCall(
                        id=block.data.id,
                        function=FunctionCall(name=block.data.name, arguments=dumps(block.data.arguments)),
                    )
                    for block in blocks
                    if isinstance(block, ToolCallBlock)
                ]
                messages.append(AssistantMessage(id=f"sb-{event.seq}", content=text or None, tool_calls=calls or None))
            case ToolResult():
                text = result_text(event.content)
                messages.append(ToolMessage(id=f"{event.call_id}.result", tool_call_id=event.call_id, content=text))
    return messages


async def _history_events(
    state: AppState, session_id: str
) -> AsyncIterator[MessageUser | MessageAssistant | ToolResult]:
    """The newest log's messages and results, newest first (only those are decoded)."""
    async for _, raw in back(state, session_id):
        if not _in_history(raw):
            continue
        event = decode_known(raw)
        if isinstance(event, MessageUser | MessageAssistant | ToolResult):
            yield event


_HISTORY = (b'"type":"message_user"', b'"type":"message_assistant"', b'"type":"tool_result"')


def _in_history(raw: bytes) -> bool:
    head = raw[:96]
    return any(kind in head for kind in _HISTORY)
