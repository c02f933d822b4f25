"""An MCP tool result as Switchboard's: text blocks and image blocks (the event form), and whether it is
an error. Used where an MCP server answers a model's call (a grant) and where the bridge answers a call
for a local server (`switchboard tools mcp`), so both give the model the same thing."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import mcp.types as mt

from common.codec import dumps, loads
from common.events.build import (
    IMAGE_TYPES,
    MAX_IMAGE_BYTES,
    MAX_RESULT_BLOCKS,
    MAX_RESULT_CHARS,
    Block,
    image_block,
    text_block,
)
from workers.mcp.mapped import Mapped

EMPTY_TEXT = "(the tool returned no content)"


def _kb(characters: int) -> int:
    return max(1, round(characters * 3 / 4 / 1024))


def _image(item: mt.ImageContent, budget: list[int]) -> Block:
    kind = item.mime_type
    if kind not in IMAGE_TYPES:
        return text_block(
            f"[an image of type {kind[:100]}, {_kb(len(item.data))} KB, left out: not PNG, JPEG, WebP or GIF]"
        )
    try:
        size = len(base64.b64decode(item.data, validate=True))
    except (binascii.Error, ValueError):
        return text_block(f"[an image of type {kind} left out: its data is not base64]")
    if size > budget[0]:
        return text_block(
            f"[an image of type {kind}, {size // 1024} KB, left out: past {MAX_IMAGE_BYTES:,} bytes of images a result]"
        )
    budget[0] -= size
    return image_block(kind, item.data)


def _resource(item: mt.EmbeddedResource) -> Block:
    resource = item.resource
    if isinstance(resource, mt.TextResourceContents):
        return text_block(f"resource {resource.uri}:\n{resource.text}")
    kind = resource.mime_type or "application/octet-stream"
    return text_block(f"[resource {resource.uri}, {kind}, {_kb(len(resource.blob))} KB, not passed on]")


def _block(item: Any, budget: list[int]) -> Block:
    if isinstance(item, mt.TextContent):
        return text_block(item.text)
    if isinstance(item, mt.ImageContent):
        return _image(item, budget)
    if isinstance(item, mt.AudioContent):
        return text_block(f"[audio of type {item.mime_type[:100]}, {_kb(len(item.data))} KB, not passed on]")
    if isinstance(item, mt.ResourceLink):
        about = f": {item.description}" if item.description else ""
        return text_block(f"resource link {item.name} <{item.uri}>{about}")
    if isinstance(item, mt.EmbeddedResource):
        return _resource(item)
    return text_block(f"[content of type {str(getattr(item, 'type', '?'))[:100]}, not passed on]")


def _holds_json(blocks: list[Block], structured: Any) -> bool:
    # Servers are asked to send structured content as a text block too; the model is not given it twice.
    for block in blocks:
        if block["type"] == "text":
            try:
                if loads(block["data"]["text"]) == structured:
                    return True
            except ValueError:
                continue
    return False


def _within_limits(blocks: list[Block]) -> list[Block]:
    """At most MAX_RESULT_BLOCKS blocks and MAX_RESULT_CHARS characters of text, as a client's result is."""
    if len(blocks) > MAX_RESULT_BLOCKS:
        kept = blocks[: MAX_RESULT_BLOCKS - 1]
        blocks = [*kept, text_block(f"[{len(blocks) - len(kept)} more content blocks left out]")]
    left, kept = MAX_RESULT_CHARS, []
    for block in blocks:
        if block["type"] != "text":
            kept.append(block)
            continue
        text = block["data"]["text"]
        if len(text) > left:
            note = f"\n[cut: the result's text passed {MAX_RESULT_CHARS:,} characters]"
            text = text[: max(0, left - len(note))] + note
        left -= len(text)
        kept.append(text_block(text))
        if left <= 0:
            break
    return kept


def map_result(result: mt.CallToolResult) -> Mapped:
    """The result as blocks: text, images (PNG, JPEG, WebP, GIF within the image budget; others named),
    resources as text, `structuredContent` as its JSON text; `isError` as an error."""
    budget = [MAX_IMAGE_BYTES]
    blocks = [_block(item, budget) for item in result.content]
    structured = result.structured_content
    if structured is not None and not _holds_json(blocks, structured):
        blocks.append(text_block(dumps(structured)))
    return Mapped(_within_limits(blocks) or [text_block(EMPTY_TEXT)], bool(result.is_error))
