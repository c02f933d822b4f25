"""The session events: every type Switchboard stores or streams, declared once.

Each event is a record here, its fields in the order they are written: a script or the Python side appends
`{"type":...,<fields in this order>}` and the log splices `seq` and `created_at` in front. Everything else
about an event is derived from these declarations (`common.events.generate` writes it, and a test fails when
a written copy drifts): the Lua builders the scripts call to append one, the pydantic models of the OpenAPI
document, the byte marks that pick events out of a stream without decoding them, the TypeScript types of
`switchboard.d.ts` and the table of docs/events.md.

A field is required unless it has a default. A nullable field (`X | None`, no default) is always written,
`null` when it has no value; a field whose default is `UNSET` is written only when it has one. A field
or an event marked `EXT` is an extension of Switchboard's: the Subako SDK ignores it (or, for an event, the
default stream does not carry it: `Shown.include` names what a reader asks for to get it).

The docstrings, and the comments just above a field or an alias, are copied by the generator into what it
writes (the d.ts, the OpenAPI document, docs/events.md), so they are written for a reader of the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, get_args

import msgspec
from msgspec import UNSET, UnsetType

# An extension of Switchboard's (not in the Subako wire): a field the SDK ignores.
EXT = msgspec.Meta(extra={"extension": True})

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Shown:
    """Who sees events of a type. `logged`: stored in the log with a seq (otherwise a live frame that is
    never stored); `include`: the word of `?include=` a reader needs to see it (None: every reader);
    `sdk`: one of the 20 types the Subako SDK knows."""

    logged: bool = True
    include: str | None = None
    sdk: bool = True


@dataclass(frozen=True, slots=True)
class Notable:
    """A notable event type: the script appending one also leaves a notice for the workers (`n|<sid>|<seq>`
    on its partition's work stream, lib/core.lua), which they hand to their consumers (workers/notices.py:
    webhooks, the inbox). `webhook`: the webhook event type it is delivered as (None: no webhook carries it;
    the inbox reads it)."""

    webhook: str | None = None


class Record(msgspec.Struct, frozen=True, tag_field="type"):
    """A tagged JSON object of the wire (an event, a content block): its `type` first."""


# --- content blocks ----------------------------------------------------------------------------------


class TextData(msgspec.Struct, frozen=True):
    text: str


class TextBlock(Record, tag="text", frozen=True):
    """A text block of a message or a tool result."""

    data: TextData


class ToolCallData(msgspec.Struct, frozen=True):
    id: str
    name: str
    arguments: JsonObject


class ToolCallBlock(Record, tag="tool_call", frozen=True):
    """A tool call block of an assistant message."""

    data: ToolCallData


class ThinkingData(msgspec.Struct, frozen=True):
    thinking: str
    redacted: bool
    signature: str | None


class ThinkingBlock(Record, tag="thinking", frozen=True):
    """A thinking block of an assistant message."""

    data: ThinkingData


# The media types an image result may have.
ImageMediaType = Literal["image/png", "image/jpeg", "image/webp", "image/gif"]


class ImageData(msgspec.Struct, frozen=True):
    media_type: ImageMediaType
    # Base64 (standard alphabet, padded); a result's images hold at most 5 MiB decoded in all.
    data: str


class ImageBlock(Record, tag="image", frozen=True):
    """An image block of a tool result: shown as it is only to readers that ask (`?include=images`),
    otherwise as a text block naming the image."""

    data: ImageData


class AudioData(msgspec.Struct, frozen=True):
    # An audio/* media type.
    media_type: str
    # Base64 (standard alphabet, padded); counted with the result's images against their 5 MiB.
    data: str


class AudioBlock(Record, tag="audio", frozen=True):
    """An audio block of a tool result (an extension, MCP's AudioContent): shown as it is only to readers
    that ask (`?include=extensions`), otherwise as a text block naming it."""

    data: AudioData


class ResourceData(msgspec.Struct, frozen=True, omit_defaults=True):
    uri: str
    media_type: str | UnsetType = UNSET
    # The resource's text, or (`blob`) its bytes in base64: exactly one of the two.
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET


class ResourceBlock(Record, tag="resource", frozen=True):
    """A resource embedded in a tool result (an extension, MCP's EmbeddedResource): shown as it is only to
    readers that ask (`?include=extensions`), otherwise as a text block naming it."""

    data: ResourceData


class ResourceLinkData(msgspec.Struct, frozen=True, omit_defaults=True):
    uri: str
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    media_type: str | UnsetType = UNSET


class ResourceLinkBlock(Record, tag="resource_link", frozen=True):
    """A link to a resource in a tool result (an extension, MCP's ResourceLink): shown as it is only to
    readers that ask (`?include=extensions`), otherwise as a text block naming it."""

    data: ResourceLinkData


# A block of a message.
MessageBlock = TextBlock | ToolCallBlock | ThinkingBlock
# A block of a tool result.
ResultBlock = TextBlock | ToolCallBlock | ThinkingBlock | ImageBlock | AudioBlock | ResourceBlock | ResourceLinkBlock


class MessageBody(msgspec.Struct, frozen=True):
    """A message of the transcript."""

    role: Literal["user", "assistant", "tool_result"]
    content: list[MessageBlock]
    # In Subako's shape; Switchboard writes none.
    is_error: bool | UnsetType | None = UNSET
    # An assistant message names the model that wrote it; a user message has no model.
    model: str | UnsetType | None = UNSET
    # Correlates an assistant message with a proxied model call (Subako's; Switchboard writes none).
    model_call_id: str | UnsetType | None = UNSET
    # In Subako's shape; Switchboard writes none.
    tool_call_id: str | UnsetType | None = UNSET


class TokenUsage(msgspec.Struct, frozen=True):
    """The tokens a run's model steps used, as the provider counted them (each only where the provider gave
    it; `input_tokens` includes the cached ones, `output_tokens` the reasoning ones)."""

    input_tokens: int | UnsetType = UNSET
    output_tokens: int | UnsetType = UNSET
    cached_input_tokens: int | UnsetType = UNSET
    reasoning_tokens: int | UnsetType = UNSET


class ToolDescriptor(msgspec.Struct, frozen=True):
    """A tool as a registration declares it."""

    name: str
    description: str
    parameters: JsonObject
    # Its result deadline after the ack, in seconds, in place of the deployment's.
    timeout_s: Annotated[float, EXT] | UnsetType = UNSET
    # The call fails when neither progress nor the result came within this many seconds.
    heartbeat_s: Annotated[float, EXT] | UnsetType = UNSET
    # What a call does when its registration leaves, lapses or drops the tool before answering: `fail`
    # (client_gone, the default) or `wait` for the next registration of the same name offering the tool.
    on_leave: Annotated[Literal["wait", "fail"], EXT] | UnsetType = UNSET


# The lifetimes' names end in Body as the OpenAPI document names them: the request a client registers with
# (api/schemas/clients.py) has lifetimes of its own, bounded.


class NeverLifetimeBody(Record, tag="never", frozen=True):
    """A registration that lives until it leaves."""


class TtlDataBody(msgspec.Struct, frozen=True):
    seconds: Annotated[int, msgspec.Meta(ge=0)]


class TtlLifetimeBody(Record, tag="ttl", frozen=True):
    """A registration that lives as long as it pings within `seconds`."""

    data: TtlDataBody


# How long a registration lives: until it leaves, or as long as it pings within `seconds`.
Lifetime = NeverLifetimeBody | TtlLifetimeBody

# --- events --------------------------------------------------------------------------------------------


class Event(Record, frozen=True, kw_only=True, omit_defaults=True):
    """A session event. `seq` and `created_at` are the log's (a live frame has neither): they are spliced in
    front of the fields as the event is appended, so a body built here has neither (their defaults are not
    written; every other field with a default is `UNSET`, and a nullable one has none)."""

    shown: ClassVar[Shown] = Shown()
    # Whether appending one leaves a notice for the workers' consumers, and its webhook type (None: not
    # notable). Making a type notable is this one line on its record.
    notice: ClassVar[Notable | None] = None
    seq: int = 0
    created_at: str = ""


class SessionCreated(Event, tag="session_created", frozen=True):
    agent_id: str
    agent_version_id: str


# Where a user message came from: input that starts a run, input folded into an active run, or input
# posted with an API key on behalf of a user.
InputSource = Literal["client", "steer", "external"]


class MessageUser(Event, tag="message_user", frozen=True):
    message: MessageBody
    source: InputSource
    # What posted the input when it was not a request: `schedule`, a schedule of the session firing.
    trigger: Annotated[Literal["schedule"], EXT] | UnsetType = UNSET
    # The schedule that fired (with `trigger: "schedule"`).
    schedule_id: Annotated[str, EXT] | UnsetType = UNSET


class MessageAssistant(Event, tag="message_assistant", frozen=True):
    message: MessageBody


class ToolCall(Event, tag="tool_call", frozen=True):
    """The model called a tool, by its model-visible name (such as `client__web__highlight_row`)."""

    call_id: str
    name: str
    arguments: JsonObject


class ToolResult(Event, tag="tool_result", frozen=True):
    call_id: str
    content: list[ResultBlock]
    is_error: bool
    # The result as a JSON object too (MCP's structuredContent), where the tool gave one.
    structured: Annotated[JsonObject, EXT] | UnsetType = UNSET


class RunQueued(Event, tag="run_queued", frozen=True):
    run_id: str


class RunStarted(Event, tag="run_started", frozen=True):
    run_id: str
    # The run's W3C trace id (32 lowercase hex digits), when the deployment traces (docs/observability.md).
    trace_id: Annotated[str, EXT] | UnsetType = UNSET


class RunCompleted(Event, tag="run_completed", frozen=True):
    notice: ClassVar[Notable | None] = Notable("run.completed")
    run_id: str
    # What the run's model steps used; absent when no step reported any (the scripted model's runs).
    usage: Annotated[TokenUsage, EXT] | UnsetType = UNSET
    # The run's W3C trace id (32 lowercase hex digits), when the deployment traces (docs/observability.md).
    trace_id: Annotated[str, EXT] | UnsetType = UNSET


class RunCancelled(Event, tag="run_cancelled", frozen=True):
    notice: ClassVar[Notable | None] = Notable("run.cancelled")
    run_id: str
    # The run's W3C trace id (32 lowercase hex digits), when the deployment traces (docs/observability.md).
    trace_id: Annotated[str, EXT] | UnsetType = UNSET


class RunFailed(Event, tag="run_failed", frozen=True):
    notice: ClassVar[Notable | None] = Notable("run.failed")
    run_id: str
    error: str
    # The run's W3C trace id (32 lowercase hex digits), when the deployment traces (docs/observability.md).
    trace_id: Annotated[str, EXT] | UnsetType = UNSET


class SessionError(Event, tag="error", frozen=True):
    """An error of the session (one of the Subako event types)."""

    message: str


class ApprovalRequested(Event, tag="approval_requested", frozen=True):
    notice: ClassVar[Notable | None] = Notable("approval.requested")
    call_id: str
    server: str
    tool: str
    arguments: JsonObject
    args_hash: str
    # Where a call no run made came from (`mcp`: an MCP client of the session).
    from_: Annotated[str, EXT] | UnsetType = msgspec.field(default=UNSET, name="from")


class ApprovalResolved(Event, tag="approval_resolved", frozen=True):
    # It closes the inbox's approval item; no webhook carries it.
    notice: ClassVar[Notable | None] = Notable()
    call_id: str
    decision: Literal["allow", "deny"]
    deny_message: str | None
    resolved_by: str | None
    # The decision is remembered for later calls of the same tool in this session.
    remember: Annotated[Literal["session"], EXT] | UnsetType = UNSET
    # Decided by a remembered decision.
    remembered: Annotated[Literal[True], EXT] | UnsetType = UNSET
    # The arguments the call runs with instead of the model's.
    arguments: Annotated[JsonObject, EXT] | UnsetType = UNSET
    # Why it was decided without a person: `timeout`, its policy's approval_timeout_s ran out (a deny).
    reason: Annotated[Literal["timeout"], EXT] | UnsetType = UNSET


class ClientRegistered(Event, tag="client_registered", frozen=True):
    client_id: str
    name: str
    lifetime: Lifetime
    tools: list[ToolDescriptor]


class ClientToolsUpdated(Event, tag="client_tools_updated", frozen=True):
    client_id: str
    tools: list[ToolDescriptor]


class ClientLeft(Event, tag="client_left", frozen=True):
    client_id: str
    reason: Literal["departed", "timed_out"]


class ClientToolDispatched(Event, tag="client_tool_dispatched", frozen=True):
    """A call sent to a client; the browser SDK acks and runs it when the client is one of its connection's."""

    client_id: str
    call_id: str
    # The tool's own name, as the client declared it.
    tool: str
    arguments: JsonObject
    # Where a call no run made came from (`mcp`: an MCP client of the session).
    from_: Annotated[str, EXT] | UnsetType = msgspec.field(default=UNSET, name="from")
    # The W3C trace context of the call's `execute_tool` span, when the deployment traces
    # (docs/observability.md): a client that traces its work makes its span a child of it and sends its own
    # span back as the `traceparent` header of the ack, progress and result requests.
    traceparent: Annotated[str, EXT] | UnsetType = UNSET


class ClientToolAcked(Event, tag="client_tool_acked", frozen=True):
    client_id: str
    call_id: str


class ClientToolFailed(Event, tag="client_tool_failed", frozen=True):
    """A client call that cannot be answered any more; the browser SDK aborts a running `execute`'s signal."""

    client_id: str
    call_id: str
    reason: Literal["client_gone", "ack_timeout", "result_timeout", "run_gone"]
    # `cancelled` when the call was cancelled on its own.
    detail: Annotated[str, EXT] | UnsetType = UNSET


class Custom(Event, tag="custom", frozen=True):
    """An event of a kind of its own. Of Switchboard's kinds, `timing` (a run's or a step's) is shown only
    to readers that ask (`?include=timing`)."""

    kind: str
    payload: JsonObject


class StepTiming(msgspec.Struct, frozen=True, tag_field="scope", tag="step"):
    """What a reader needs of a step's timing payload (a `custom` of kind `timing`, scope `step`): the run
    and step it ends. Its figures are left unread; a run's timing (scope `run`) is not one."""

    run_id: str
    step: int


class ClientToolProgress(Event, tag="client_tool_progress", frozen=True):
    """Progress on a client call."""

    shown: ClassVar[Shown] = Shown(include="progress", sdk=False)
    client_id: str
    call_id: str
    message: str | None
    fraction: float | None


class ToolProgress(Event, tag="tool_progress", frozen=True):
    """An MCP server's progress on a server call: `server` the grant's name, `tool` the MCP tool's."""

    shown: ClassVar[Shown] = Shown(include="progress", sdk=False)
    call_id: str
    server: str
    tool: str
    message: str | None
    fraction: float | None


class MessageDelta(Event, tag="message_delta", frozen=True):
    """Text the model is writing, as it streams."""

    shown: ClassVar[Shown] = Shown(logged=False, include="deltas", sdk=False)
    run_id: str
    step: int
    delta: str
    # Voids the step's deltas so far.
    reset: Annotated[Literal[True], EXT] | UnsetType = UNSET


class ThinkingDelta(Event, tag="thinking_delta", frozen=True):
    """What the model reasons, as it streams (where the provider shows it); shown to a reader that asks for
    `deltas` as well."""

    shown: ClassVar[Shown] = Shown(logged=False, include="thinking", sdk=False)
    run_id: str
    step: int
    delta: str


class ClientToolWaiting(Event, tag="client_tool_waiting", frozen=True):
    """A call of a tool declared `on_leave: "wait"` whose registration left, lapsed or dropped the tool
    before answering: it waits for the next registration of `client_name` that offers `tool` (dispatched
    again then, with the same `call_id`), and fails with `client_gone` at `deadline` if none comes."""

    shown: ClassVar[Shown] = Shown(include="extensions", sdk=False)
    notice: ClassVar[Notable | None] = Notable("call.waiting")
    call_id: str
    # The tool's own name, as the client declared it.
    tool: str
    # The name a registration must hold to be handed the call.
    client_name: str
    # When the wait began.
    since: str
    # When the call fails with client_gone unless a registration took it: its tool's timeout_s (or the
    # deployment's result deadline) after its first dispatch.
    deadline: str
    # The run that made the call; null for a call no run made (an MCP client's).
    run_id: str | None


# How a person answered an input request (MCP elicitation's actions): `accept` with the content asked for,
# `decline` (said no), `cancel` (dismissed it without choosing).
InputAction = Literal["accept", "decline", "cancel"]


class InputRequested(Event, tag="input_requested", frozen=True):
    """A client asked the person during a call it acked (as MCP elicitation does), or an agent's MCP grant's
    server asked during a call of its tool: a form (`schema`, a flat object of string, number, integer,
    boolean and enum properties) or a page to visit (`url`). Answered at
    `POST /v1/sessions/{sid}/input-requests/{request_id}`; a client call's result deadline and heartbeat
    wait meanwhile (its tool's `timeout_s` does not; a grant's call waits within its grant's `timeout_s`)."""

    shown: ClassVar[Shown] = Shown(include="extensions", sdk=False)
    notice: ClassVar[Notable | None] = Notable("input.requested")
    request_id: str
    call_id: str
    # The registration that asked; empty for a grant's server (`source` `mcp`).
    client_id: str
    # The tool's own name, as the client (or the grant's server) declared it.
    tool: str
    # The request's name within its call (MCP's `inputRequests` key): the request id unless the client chose
    # one; a grant's server's own key.
    key: str
    message: str
    # Who asks: `client`, a client tool through its registration; `mcp`, an agent's MCP grant's server.
    source: Literal["client", "mcp"]
    # The form asked for (MCP's `requestedSchema`); absent for a URL-mode request.
    schema_: JsonObject | UnsetType = msgspec.field(default=UNSET, name="schema")
    # The page the person is sent to (URL mode); absent for a form.
    url: str | UnsetType = UNSET
    # The grant whose server asks (source `mcp`); absent for a client's request.
    grant: str | UnsetType = UNSET


class InputProvided(Event, tag="input_provided", frozen=True):
    """An input request ended: the person answered it (`action`, with the form's `content` for `accept`), or
    its call settled or went back to waiting for its client first (`reason`; `action` is then `cancel`)."""

    shown: ClassVar[Shown] = Shown(include="extensions", sdk=False)
    # It closes the inbox's input item; no webhook carries it.
    notice: ClassVar[Notable | None] = Notable()
    request_id: str
    call_id: str
    # The registration that asked.
    client_id: str
    action: InputAction
    # What the person filled in (for `accept`); null otherwise.
    content: JsonObject | None
    # Why the request ended with no answer: `call_settled` (the call got its result or failed) or
    # `call_waiting` (its client left and the call waits for the next one); absent for a person's answer.
    reason: Literal["call_settled", "call_waiting"] | UnsetType = UNSET


class McpAuthorizationRequired(Event, tag="mcp_authorization_required", frozen=True):
    """A step needed an OAuth grant whose server the person has not signed in to (no token kept for the
    session's subject, else the session): opening `authorization_url` in a browser signs them in, until
    `expires_at`. Declined at `POST /v1/sessions/{sid}/mcp-authorizations/{authorization_id}/decline`. The
    run waits for it, held by no worker, until it completes, is declined or runs out."""

    shown: ClassVar[Shown] = Shown(include="extensions", sdk=False)
    # It opens the inbox's `authorization` item, and goes out as an `input.requested` webhook.
    notice: ClassVar[Notable | None] = Notable("input.requested")
    authorization_id: str
    # The grant's name, as the agent's version declares it.
    grant: str
    server_url: str
    authorization_url: str
    expires_at: str


class McpAuthorizationCompleted(Event, tag="mcp_authorization_completed", frozen=True):
    """The person signed in to an OAuth grant's MCP server: the authorization server sent their browser back
    to `GET /v1/mcp/oauth/callback` and the code it carried was exchanged for tokens, now kept for the
    session's subject (else the session). A run waiting for it goes on with the grant's tools."""

    shown: ClassVar[Shown] = Shown(include="extensions", sdk=False)
    # It closes the inbox's `authorization` item; no webhook carries it.
    notice: ClassVar[Notable | None] = Notable()
    authorization_id: str
    # The grant's name, as the agent's version declares it.
    grant: str
    server_url: str


class McpAuthorizationDeclined(Event, tag="mcp_authorization_declined", frozen=True):
    """A sign-in the session asked for ended without one: the person declined it (at
    `POST /v1/sessions/{sid}/mcp-authorizations/{authorization_id}/decline`) or it ran out (`expires_at`
    passed). A run waiting for it
    goes on without the grant's tools, the model told why; the grant is not asked for again in that run (nor,
    once declined, in the session)."""

    shown: ClassVar[Shown] = Shown(include="extensions", sdk=False)
    # It closes the inbox's `authorization` item; no webhook carries it.
    notice: ClassVar[Notable | None] = Notable()
    authorization_id: str
    # The grant's name, as the agent's version declares it.
    grant: str
    server_url: str
    # `declined`: the person said no; `expired`: the wait (SWITCHBOARD_MCP_AUTHORIZATION_TIMEOUT_S) ran out.
    reason: Literal["declined", "expired"]


class ToolCallDelta(Event, tag="tool_call_delta", frozen=True):
    """A fragment of a tool call's arguments' JSON text, as the model writes it."""

    shown: ClassVar[Shown] = Shown(logged=False, include="deltas", sdk=False)
    run_id: str
    step: int
    call_id: str
    # The call's place among the step's calls, from 0.
    index: int
    # The model-visible name, such as `client__web__lookup`.
    name: str
    delta: str


# The 20 event types the Subako SDK knows: what the default stream carries.
SdkEvent = (
    SessionCreated
    | MessageUser
    | MessageAssistant
    | ToolCall
    | ToolResult
    | RunQueued
    | RunStarted
    | RunCompleted
    | RunCancelled
    | RunFailed
    | SessionError
    | ApprovalRequested
    | ApprovalResolved
    | ClientRegistered
    | ClientToolsUpdated
    | ClientLeft
    | ClientToolDispatched
    | ClientToolAcked
    | ClientToolFailed
    | Custom
)
# Events shown only to a reader whose `include` asks for them.
ExtensionEvent = (
    ClientToolProgress
    | ToolProgress
    | ClientToolWaiting
    | InputRequested
    | InputProvided
    | McpAuthorizationRequired
    | McpAuthorizationCompleted
    | McpAuthorizationDeclined
    | MessageDelta
    | ThinkingDelta
    | ToolCallDelta
)
# Every event a stream may carry.
AnyEvent = SdkEvent | ExtensionEvent

# Every event type, in the order the docs list them: the unions' order.
EVENTS: tuple[type[Event], ...] = get_args(AnyEvent)


def type_name(cls: type[Record]) -> str:
    """The `type` an event or block class is written with."""
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


BY_TYPE: dict[str, type[Event]] = {type_name(cls): cls for cls in EVENTS}


def _words(logged: bool) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c.shown.include for c in EVENTS if c.shown.include and c.shown.logged is logged))


# The words of `?include=` a listing of the log takes: `timing` (the `custom` events of kind `timing`), those
# of the logged extension types, and `images` (results' image blocks as they are, not named in text).
LOG_INCLUDES: tuple[str, ...] = ("timing", *_words(logged=True), "images")
# What a stream takes besides: the words of the live frames (deltas), which are never logged.
STREAM_INCLUDES: tuple[str, ...] = (*LOG_INCLUDES, *_words(logged=False))
SDK_EVENT_TYPES = frozenset(name for name, cls in BY_TYPE.items() if cls.shown.sdk)
# The notable event types (`Event.notice`), and the webhook event type of each a webhook carries.
NOTABLE = frozenset(name for name, cls in BY_TYPE.items() if cls.notice is not None)
NOTICES: dict[str, str] = {
    name: cls.notice.webhook for name, cls in BY_TYPE.items() if cls.notice is not None and cls.notice.webhook
}
