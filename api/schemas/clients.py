"""Client registrations, their tools and the answers to their calls."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import AfterValidator, BaseModel, Field, model_validator

from api.schemas.common import Strict
from broker.events import image_block, text_block

MAX_TOOLS = 64
MAX_RESULT_CHARS = 65_536
MAX_PROGRESS_CHARS = 1_000
# Images in one result, decoded, in all; the blocks of one result.
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_RESULT_BLOCKS = 16
MIN_TTL_S, MAX_TTL_S = 5, 3600
MIN_TOOL_TIMEOUT_S, MAX_TOOL_TIMEOUT_S = 1, 86_400
MIN_HEARTBEAT_S, MAX_HEARTBEAT_S = 1, 3_600


def _json_schema(value: dict[str, Any]) -> dict[str, Any]:
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as error:
        where = "/" + "/".join(str(part) for part in error.absolute_path)
        raise ValueError(f"not a valid JSON Schema (Draft 2020-12): {error.message} (at {where})") from None
    return value


class ClientToolBody(Strict):
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
    description: Annotated[str, Field(max_length=4096)] = ""
    parameters: Annotated[dict[str, Any], AfterValidator(_json_schema)]
    timeout_s: Annotated[
        int | None,
        Field(
            ge=MIN_TOOL_TIMEOUT_S,
            le=MAX_TOOL_TIMEOUT_S,
            description="An extension: the result deadline after the ack, in place of the deployment's",
        ),
    ] = None
    heartbeat_s: Annotated[
        int | None,
        Field(
            ge=MIN_HEARTBEAT_S,
            le=MAX_HEARTBEAT_S,
            description="An extension: the call fails with result_timeout when neither progress nor the result "
            "came within this many seconds of the ack or of the last progress (never later than timeout_s)",
        ),
    ] = None


def _unique_tools(tools: list[ClientToolBody] | None) -> list[ClientToolBody] | None:
    names = [tool.name for tool in tools or []]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"tool names must be unique within a client; repeated: {', '.join(duplicates)}")
    return tools


Tools = Annotated[list[ClientToolBody], Field(max_length=MAX_TOOLS), AfterValidator(_unique_tools)]


class TtlData(Strict):
    seconds: Annotated[int, Field(ge=MIN_TTL_S, le=MAX_TTL_S)]


class TtlLifetime(Strict):
    type: Literal["ttl"]
    data: TtlData


class NeverLifetime(Strict):
    type: Literal["never"]


class RegisterClientBody(Strict):
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
    fraction: Annotated[float | None, Field(ge=0, le=1, description="How much is done, 0 to 1")] = None


class TextContent(Strict):
    type: Literal["text"]
    text: Annotated[str, Field(max_length=MAX_RESULT_CHARS)]


class ImageContent(Strict):
    type: Literal["image"]
    media_type: Literal["image/png", "image/jpeg", "image/webp", "image/gif"]
    data: Annotated[str, Field(description="The image, base64 encoded")]


ResultContent = Annotated[TextContent | ImageContent, Field(discriminator="type")]


class ClientCallResultBody(Strict):
    text: Annotated[str | None, Field(max_length=MAX_RESULT_CHARS)] = None
    content: Annotated[
        list[ResultContent] | None,
        Field(
            min_length=1,
            max_length=MAX_RESULT_BLOCKS,
            description="Extension, instead of `text`: text and image blocks (images at most "
            f"{MAX_IMAGE_BYTES:,} bytes decoded per result in all; text at most {MAX_RESULT_CHARS:,} characters)",
        ),
    ] = None
    is_error: bool | None = None

    @model_validator(mode="after")
    def _one_form(self) -> ClientCallResultBody:
        if (self.text is None) == (self.content is None):
            raise ValueError("give the result as `text` or as `content`, one of the two")
        if self.content is not None:
            texts = sum(len(block.text) for block in self.content if isinstance(block, TextContent))
            if texts > MAX_RESULT_CHARS:
                raise ValueError(f"content: {texts:,} characters of text; the limit is {MAX_RESULT_CHARS:,}")
            decoded = 0
            for index, block in enumerate(self.content):
                if isinstance(block, ImageContent):
                    try:
                        decoded += len(base64.b64decode(block.data, validate=True))
                    except binascii.Error:
                        raise ValueError(f"content[{index}].data: not valid base64") from None
            if decoded > MAX_IMAGE_BYTES:
                raise ValueError(f"content: images of {decoded:,} bytes decoded; the limit is {MAX_IMAGE_BYTES:,}")
        return self

    def result(self) -> str | list[dict[str, Any]]:
        """The result's text, or the blocks of its `tool_result` event (the SDK's shape: `type`, `data`)."""
        if self.content is None:
            return self.text or ""
        return [
            text_block(block.text) if isinstance(block, TextContent) else image_block(block.media_type, block.data)
            for block in self.content
        ]


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
