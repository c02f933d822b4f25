"""The 20 session event types, as the SDK parses them (for the OpenAPI document and the tests)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field


class TextData(BaseModel):
    text: str


class TextBlock(BaseModel):
    type: Literal["text"]
    data: TextData


class ToolCallData(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any]


class ToolCallBlock(BaseModel):
    type: Literal["tool_call"]
    data: ToolCallData


class ThinkingData(BaseModel):
    thinking: str
    redacted: bool
    signature: str | None = None


class ThinkingBlock(BaseModel):
    type: Literal["thinking"]
    data: ThinkingData


ContentBlock = Annotated[TextBlock | ToolCallBlock | ThinkingBlock, Field(discriminator="type")]


class MessageBody(BaseModel):
    role: Literal["user", "assistant", "tool_result"]
    content: list[ContentBlock]
    is_error: bool | None = None
    model: str | None = None
    model_call_id: str | None = None
    tool_call_id: str | None = None


class EventBase(BaseModel):
    seq: int
    created_at: datetime


class SessionCreated(EventBase):
    type: Literal["session_created"]
    agent_id: str
    agent_version_id: str


class MessageUser(EventBase):
    type: Literal["message_user"]
    message: MessageBody
    source: Literal["client", "steer", "external"]


class MessageAssistant(EventBase):
    type: Literal["message_assistant"]
    message: MessageBody


class ToolCall(EventBase):
    type: Literal["tool_call"]
    call_id: str
    name: str
    arguments: dict[str, Any]


class ToolResult(EventBase):
    type: Literal["tool_result"]
    call_id: str
    content: list[ContentBlock]
    is_error: bool


class RunQueued(EventBase):
    type: Literal["run_queued"]
    run_id: str


class RunStarted(EventBase):
    type: Literal["run_started"]
    run_id: str


class TokenUsage(BaseModel):
    """An extension: the tokens a run's model steps used, as the provider counted them (each count only
    where the provider gave it; `input_tokens` includes the cached ones, `output_tokens` the reasoning)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None


class RunCompleted(EventBase):
    type: Literal["run_completed"]
    run_id: str
    # An extension, absent when no step reported any (the scripted model's runs).
    usage: TokenUsage | None = None


class RunCancelled(EventBase):
    type: Literal["run_cancelled"]
    run_id: str


class RunFailed(EventBase):
    type: Literal["run_failed"]
    run_id: str
    error: str


class Error(EventBase):
    type: Literal["error"]
    message: str


class ApprovalRequested(EventBase):
    type: Literal["approval_requested"]
    call_id: str
    server: str
    tool: str
    arguments: dict[str, Any]
    args_hash: str


class ApprovalResolved(EventBase):
    type: Literal["approval_resolved"]
    call_id: str
    decision: Literal["allow", "deny"]
    deny_message: str | None = None
    resolved_by: str | None = None


class ToolDescriptor(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class NeverLifetimeBody(BaseModel):
    type: Literal["never"]


class TtlDataBody(BaseModel):
    seconds: Annotated[int, Field(ge=0)]


class TtlLifetimeBody(BaseModel):
    type: Literal["ttl"]
    data: TtlDataBody


class ClientRegistered(EventBase):
    type: Literal["client_registered"]
    client_id: str
    name: str
    lifetime: Annotated[NeverLifetimeBody | TtlLifetimeBody, Field(discriminator="type")]
    tools: list[ToolDescriptor]


class ClientToolsUpdated(EventBase):
    type: Literal["client_tools_updated"]
    client_id: str
    tools: list[ToolDescriptor]


class ClientLeft(EventBase):
    type: Literal["client_left"]
    client_id: str
    reason: Literal["departed", "timed_out"]


class ClientToolDispatched(EventBase):
    type: Literal["client_tool_dispatched"]
    client_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]


class ClientToolAcked(EventBase):
    type: Literal["client_tool_acked"]
    client_id: str
    call_id: str


class ClientToolFailed(EventBase):
    type: Literal["client_tool_failed"]
    client_id: str
    call_id: str
    reason: Literal["client_gone", "ack_timeout", "result_timeout", "run_gone"]


class Custom(EventBase):
    type: Literal["custom"]
    kind: str
    payload: dict[str, Any]


SessionEvent = Annotated[
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
    | Error
    | ApprovalRequested
    | ApprovalResolved
    | ClientRegistered
    | ClientToolsUpdated
    | ClientLeft
    | ClientToolDispatched
    | ClientToolAcked
    | ClientToolFailed
    | Custom,
    Field(discriminator="type"),
]


class SessionEventPage(BaseModel):
    items: list[SessionEvent]
    next_cursor: int | None


REMEMBER = Field(
    description="Extension: `session` decides later calls of the same model-visible tool in this session the "
    "same way, without asking"
)


class AllowDecision(BaseModel):
    model_config = {"extra": "forbid"}
    decision: Literal["allow"]
    remember: Annotated[Literal["session"] | None, REMEMBER] = None
    arguments: Annotated[
        dict[str, Any] | None,
        Field(
            description="Extension: run the call with these arguments instead of the model's (checked against "
            "a client tool's schema)"
        ),
    ] = None


class DenyDecision(BaseModel):
    model_config = {"extra": "forbid"}
    decision: Literal["deny"]
    message: str | None = None
    remember: Annotated[Literal["session"] | None, REMEMBER] = None


ApprovalDecisionForm = Annotated[AllowDecision | DenyDecision, Field(discriminator="decision")]
