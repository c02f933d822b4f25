"""Client registrations, their tools and the answers to their calls."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from api.schemas.common import JSON_NUMBER, JsonBool, Strict
from api.schemas.json_schema import check_json_schema
from api.schemas.result_content import ResultContent, check_content, event_block
from broker.settings import MAX_WAIT_CEILING_S
from common.codec import dumps
from common.events.blocks import MAX_STRUCTURED_BYTES
from common.events.build import MAX_IMAGE_BYTES, MAX_RESULT_BLOCKS, MAX_RESULT_CHARS

MAX_TOOLS = 64
MAX_PROGRESS_CHARS = 1_000
MIN_TTL_S, MAX_TTL_S = 5, 3600
# Both deadlines go up to SWITCHBOARD_MAX_WAIT_S, which a route checks after parsing (api/schemas/waits.py):
# the schema states the most that setting may be.
MIN_TOOL_TIMEOUT_S, MIN_HEARTBEAT_S = 1, 1


TOOL_EXAMPLE: dict[str, Any] = {
    "name": "highlight_row",
    "description": "Highlight a row in the table the user is looking at",
    "parameters": {"type": "object", "properties": {"row_id": {"type": "string"}}, "required": ["row_id"]},
}


MAX_ANNOTATIONS = 16


def _annotations(hints: dict[str, bool | str | None] | None) -> dict[str, bool | str | None] | None:
    if hints is None:
        return None
    if len(hints) > MAX_ANNOTATIONS:
        raise ValueError(f"at most {MAX_ANNOTATIONS} annotations, not {len(hints)}")
    for key, value in hints.items():
        if len(key) > 64 or (isinstance(value, str) and len(value) > 500):
            raise ValueError("an annotation's name is at most 64 characters and its text at most 500")
    return hints


def _an_object(parameters: Any) -> Any:
    if not isinstance(parameters, dict):
        raise ValueError(
            'must be a JSON object (an object schema, such as {"type": "object", "properties": {...}}), '
            f"not {_json_kind(parameters)}"
        )
    return parameters


def _json_kind(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array"


class ClientToolBody(Strict):
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
    description: Annotated[str, Field(max_length=4096)] = ""
    parameters: Annotated[dict[str, Any], BeforeValidator(_an_object), AfterValidator(check_json_schema)]
    timeout_s: Annotated[
        Annotated[int, Field(ge=MIN_TOOL_TIMEOUT_S, le=MAX_WAIT_CEILING_S), JSON_NUMBER] | None,
        Field(
            description="An extension: the result deadline after the ack, in place of the deployment's "
            "(at most SWITCHBOARD_MAX_WAIT_S, 30 days unless the deployment says otherwise)",
        ),
    ] = None
    heartbeat_s: Annotated[
        Annotated[int, Field(ge=MIN_HEARTBEAT_S, le=MAX_WAIT_CEILING_S), JSON_NUMBER] | None,
        Field(
            description="An extension: the call fails with result_timeout when neither progress nor the result "
            "came within this many seconds of the ack or of the last progress (never later than timeout_s; "
            "at most SWITCHBOARD_MAX_WAIT_S)",
        ),
    ] = None
    on_leave: Annotated[
        Literal["wait", "fail"] | None,
        Field(
            description="An extension: what a call does when the registration leaves, lapses or drops the tool "
            "before answering. `fail` (the default, Subako's): client_gone at once. `wait`: the call waits for "
            "the next registration of the same client name that offers the tool (a `client_tool_waiting` "
            "event) and is dispatched to it with the same call_id; it fails with client_gone when timeout_s "
            "(or the deployment's result deadline), counted from its first dispatch, runs out first",
        ),
    ] = None
    task_support: Annotated[
        Literal["forbidden", "optional", "required"] | None,
        Field(
            description="An extension: whether a call from an MCP caller through the session MCP server may "
            "be a task (MCP's Tasks extension, io.modelcontextprotocol/tasks). `optional` (the default): a "
            "task for a caller that declared the extension, an answer in line for any other. `required`: a "
            "task, and a caller that did not declare the extension is refused. `forbidden`: always in line",
        ),
    ] = None
    asks_first: Annotated[
        JsonBool | None,
        Field(
            description="An extension: the tool asks its caller (input requests) before its work starts. For an "
            "MCP caller that takes tasks, its call then answers what it asks in line first (an "
            "InputRequiredResult), and the retry that answers it becomes the task (MCP's Tasks extension: input "
            "gathered, then a task). Default false: such a caller gets a task at once. No difference for a "
            "caller that does not take tasks, nor for a tool whose task_support is forbidden",
        ),
    ] = None
    annotations: Annotated[
        dict[str, bool | str | None] | None,
        Field(
            description="An extension: hints about the tool, as MCP's (readOnlyHint, destructiveHint, ...): "
            "listed back as given; `destructiveHint: true` without `readOnlyHint: true` makes the tool "
            "require approval unless the agent's client_tool_policies name it",
        ),
        AfterValidator(_annotations),
    ] = None


def _distinct_names(tools: list[ClientToolBody]) -> list[ClientToolBody]:
    # The model calls a tool by its name: two of one name would leave one of them unreachable.
    first: dict[str, int] = {}
    for index, tool in enumerate(tools):
        earlier = first.setdefault(tool.name, index)
        if earlier != index:
            raise ValueError(
                f"items {earlier} and {index} are both named {tool.name!r}: each tool needs a name of its own"
            )
    return tools


Tools = Annotated[
    list[ClientToolBody],
    Field(max_length=MAX_TOOLS, description="Each tool's name differs from the others' (a repeated name is 400)"),
    AfterValidator(_distinct_names),
]


class TtlData(Strict):
    seconds: Annotated[int, Field(ge=MIN_TTL_S, le=MAX_TTL_S), JSON_NUMBER]


class TtlLifetime(Strict):
    type: Literal["ttl"]
    data: TtlData


class NeverLifetime(Strict):
    type: Literal["never"]


class RegisterClientBody(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"name": "web", "lifetime": {"type": "ttl", "data": {"seconds": 60}}, "tools": [TOOL_EXAMPLE]}]
        },
    )

    name: Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z0-9-]+$")]
    lifetime: Annotated[TtlLifetime | NeverLifetime, Field(discriminator="type")]
    tools: Tools | None = None


class RegisteredClientBody(BaseModel):
    id: UUID
    name: str
    expires_at: datetime | None


class ClientPingBody(BaseModel):
    expires_at: datetime | None


class UpdateClientToolsBody(Strict):
    tools: Tools


class ClientCallProgressBody(Strict):
    """Progress on an acked call (an extension)."""

    message: Annotated[str | None, Field(max_length=MAX_PROGRESS_CHARS)] = None
    fraction: Annotated[
        Annotated[float, Field(ge=0, le=1), JSON_NUMBER] | None, Field(description="How much is done, 0 to 1")
    ] = None


# Exactly one of the two forms, as the document states it (a null is as good as absent).
_ONE_FORM: dict[str, Any] = {
    "oneOf": [
        {"required": ["text"], "properties": {"text": {"type": "string"}}},
        {"required": ["content"], "properties": {"content": {"type": "array"}}},
    ]
}


class ClientCallResultBody(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={**_ONE_FORM, "examples": [{"text": "Row 7 is highlighted."}]}
    )

    text: Annotated[str | None, Field(max_length=MAX_RESULT_CHARS)] = None
    content: Annotated[
        list[ResultContent] | None,
        Field(
            min_length=1,
            max_length=MAX_RESULT_BLOCKS,
            description="Extension, instead of `text`: text, image, audio, resource and resource_link blocks "
            "(MCP's `mimeType` is taken for `media_type`; images, audio and resource blobs at most "
            f"{MAX_IMAGE_BYTES:,} bytes decoded per result in all; text at most {MAX_RESULT_CHARS:,} characters)",
        ),
    ] = None
    structured: Annotated[
        dict[str, Any] | None,
        Field(
            description="Extension: the result as a JSON object too (MCP's structuredContent), at most "
            f"{MAX_STRUCTURED_BYTES:,} bytes as JSON"
        ),
    ] = None
    is_error: JsonBool | None = None

    @model_validator(mode="after")
    def _one_form(self) -> ClientCallResultBody:
        if (self.text is None) == (self.content is None):
            raise ValueError("give the result as `text` or as `content`, one of the two")
        if self.content is not None:
            check_content(self.content)
        size = 0 if self.structured is None else len(dumps(self.structured).encode())
        if size > MAX_STRUCTURED_BYTES:
            raise ValueError(f"structured: {size:,} bytes as JSON; the limit is {MAX_STRUCTURED_BYTES:,}")
        return self

    def result(self) -> str | list[dict[str, Any]]:
        """The result's text, or the blocks of its `tool_result` event (the SDK's shape: `type`, `data`)."""
        if self.content is None:
            return self.text or ""
        return [event_block(block) for block in self.content]


class ActiveClientBody(BaseModel):
    """An active registration (an extension: the console's clients panel)."""

    id: UUID
    name: str
    lifetime: dict[str, Any]
    expires_at: datetime | None
    created_at: datetime
    tools: list[dict[str, Any]]


class ActiveClientsBody(BaseModel):
    items: list[ActiveClientBody]
