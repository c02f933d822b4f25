"""The blocks of a client's result `content`: text and images, and (extensions, MCP's content types) audio,
embedded resources and resource links; their bounds, checked as a whole, and their event form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from api.schemas.common import Strict
from common.events.blocks import (
    AUDIO_TYPE_PATTERN,
    MAX_DESCRIPTION_CHARS,
    MAX_MEDIA_TYPE_CHARS,
    MAX_NAME_CHARS,
    MAX_URI_CHARS,
    MEDIA_TYPE_PATTERN,
    URI_DOCUMENT_PATTERN,
    audio_block,
    decoded_size,
    resource_block,
    resource_link_block,
    uri_problem,
)
from common.events.build import MAX_IMAGE_BYTES, MAX_RESULT_CHARS, Block, image_block, text_block

# Standard base64 with its padding; the longest is the whole binary allowance in one block.
BASE64_PATTERN = r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
MAX_IMAGE_CHARS = (MAX_IMAGE_BYTES + 2) // 3 * 4

Base64 = Annotated[
    str,
    Field(
        max_length=MAX_IMAGE_CHARS,
        pattern=BASE64_PATTERN,
        description="Base64 encoded (standard alphabet, padded)",
    ),
]
MediaType = Annotated[str, Field(max_length=MAX_MEDIA_TYPE_CHARS, pattern=MEDIA_TYPE_PATTERN)]


def _uri(uri: str) -> str:
    problem = uri_problem(uri)
    if problem is not None:
        raise ValueError(f"the uri is {problem}")
    return uri


# The checks are _uri's (its words name what is wrong); the document states the same as a pattern.
Uri = Annotated[
    str,
    Field(max_length=MAX_URI_CHARS, json_schema_extra={"pattern": URI_DOCUMENT_PATTERN}),
    AfterValidator(_uri),
]


class _Block(Strict):
    @model_validator(mode="before")
    @classmethod
    def _mime_type(cls, value: Any) -> Any:
        # MCP names it `mimeType`; either is taken, not both.
        if isinstance(value, dict) and "mimeType" in value:
            if "media_type" in value:
                raise ValueError("give media_type or mimeType, not both")
            value = {("media_type" if key == "mimeType" else key): item for key, item in value.items()}
        return value


class TextContent(Strict):
    type: Literal["text"]
    text: Annotated[str, Field(max_length=MAX_RESULT_CHARS)]


class ImageContent(_Block):
    type: Literal["image"]
    media_type: Literal["image/png", "image/jpeg", "image/webp", "image/gif"]
    data: Annotated[Base64, Field(description="The image, base64 encoded (standard alphabet, padded)")]


class AudioContent(_Block):
    """Extension: an audio clip (MCP's AudioContent)."""

    type: Literal["audio"]
    media_type: Annotated[str, Field(max_length=MAX_MEDIA_TYPE_CHARS, pattern=AUDIO_TYPE_PATTERN)]
    data: Annotated[Base64, Field(description="The audio, base64 encoded (standard alphabet, padded)")]


class Resource(_Block):
    # Exactly one of the two, as the document states it.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {"required": ["text"], "properties": {"text": {"type": "string"}}},
                {"required": ["blob"], "properties": {"blob": {"type": "string"}}},
            ]
        },
    )

    uri: Uri
    media_type: MediaType | None = None
    text: Annotated[str | None, Field(max_length=MAX_RESULT_CHARS)] = None
    blob: Annotated[Base64 | None, Field(description="The resource's bytes, base64 encoded")] = None

    @model_validator(mode="after")
    def _one_form(self) -> Resource:
        if (self.text is None) == (self.blob is None):
            raise ValueError("give the resource's `text` or its `blob`, one of the two")
        return self


class ResourceContent(Strict):
    """Extension: a resource embedded in the result (MCP's EmbeddedResource)."""

    type: Literal["resource"]
    resource: Resource


class ResourceLinkContent(_Block):
    """Extension: a link to a resource (MCP's ResourceLink)."""

    type: Literal["resource_link"]
    uri: Uri
    name: Annotated[str | None, Field(max_length=MAX_NAME_CHARS)] = None
    description: Annotated[str | None, Field(max_length=MAX_DESCRIPTION_CHARS)] = None
    media_type: MediaType | None = None


ResultContent = Annotated[
    TextContent | ImageContent | AudioContent | ResourceContent | ResourceLinkContent, Field(discriminator="type")
]
AnyContent = TextContent | ImageContent | AudioContent | ResourceContent | ResourceLinkContent


def check_content(content: Sequence[AnyContent]) -> None:
    """The bounds of a result as a whole: its text (text blocks and text resources) and its bytes (images,
    audio and resource blobs, decoded) in all."""
    texts = sum(len(block.text) for block in content if isinstance(block, TextContent))
    texts += sum(
        len(block.resource.text)
        for block in content
        if isinstance(block, ResourceContent) and block.resource.text is not None
    )
    if texts > MAX_RESULT_CHARS:
        raise ValueError(f"content: {texts:,} characters of text; the limit is {MAX_RESULT_CHARS:,}")
    decoded = 0
    for block in content:
        data = block.data if isinstance(block, ImageContent | AudioContent) else None
        if isinstance(block, ResourceContent):
            data = block.resource.blob
        if data is not None:
            decoded += decoded_size(data) or 0
    if decoded > MAX_IMAGE_BYTES:
        raise ValueError(
            f"content: images, audio and blobs of {decoded:,} bytes decoded; the limit is {MAX_IMAGE_BYTES:,}"
        )


def event_block(block: AnyContent) -> Block:
    """A block as its `tool_result` event holds it (the SDK's shape: `type`, `data`)."""
    if isinstance(block, TextContent):
        return text_block(block.text)
    if isinstance(block, ImageContent):
        return image_block(block.media_type, block.data)
    if isinstance(block, AudioContent):
        return audio_block(block.media_type, block.data)
    if isinstance(block, ResourceContent):
        found = block.resource
        return resource_block(found.uri, found.media_type, text=found.text, blob=found.blob)
    return resource_link_block(block.uri, block.name, block.description, block.media_type)
