"""An MCP tool result as Switchboard's: its blocks (the event form), its structured content, and whether it
is an error. Used where an MCP server answers a model's call (a grant) and where the bridge answers a call
for a local server (`switchboard tools mcp`), so both give the model the same thing."""

from __future__ import annotations

from typing import Any

import mcp.types as mt

from common.codec import dumps, loads
from common.events.blocks import (
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    MAX_STRUCTURED_BYTES,
    audio_block,
    decoded_size,
    media_type_ok,
    resource_block,
    resource_link_block,
    uri_problem,
)
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
    refused = _bytes(f"an image of type {kind}", item.data, budget)
    if refused:
        return text_block(refused)
    return image_block(kind, item.data)


def _bytes(what: str, data: str, budget: list[int]) -> str | None:
    """Why base64 `data` is left out (None: it is taken, and counted against the result's budget)."""
    size = decoded_size(data)
    if size is None:
        return f"[{what} left out: its data is not base64]"
    if size > budget[0]:
        return (
            f"[{what}, {size // 1024} KB, left out: past {MAX_IMAGE_BYTES:,} bytes of images, audio and blobs a result]"
        )
    budget[0] -= size
    return None


def _audio(item: mt.AudioContent, budget: list[int]) -> Block:
    kind = item.mime_type
    if not media_type_ok(kind, audio=True):
        return text_block(f"[audio of type {kind[:100]}, {_kb(len(item.data))} KB, left out: not an audio type]")
    refused = _bytes(f"audio of type {kind}", item.data, budget)
    return text_block(refused) if refused else audio_block(kind, item.data)


def _named(uri: str, kind: str | None) -> tuple[str | None, str | None]:
    """Why a resource's URI is not taken, and its media type if it is a sane one."""
    problem = uri_problem(uri)
    return (f"[a resource left out: its uri is {problem}]" if problem else None), (
        kind if kind and media_type_ok(kind) else None
    )


def _resource(item: mt.EmbeddedResource, budget: list[int]) -> Block:
    resource = item.resource
    uri = str(resource.uri)
    refused, kind = _named(uri, resource.mime_type)
    if refused:
        return text_block(refused)
    if isinstance(resource, mt.TextResourceContents):
        return resource_block(uri, kind, text=resource.text)
    refused = _bytes(f"resource {uri[:200]}", resource.blob, budget)
    return text_block(refused) if refused else resource_block(uri, kind, blob=resource.blob)


def _link(item: mt.ResourceLink) -> Block:
    uri = str(item.uri)
    refused, kind = _named(uri, item.mime_type)
    if refused:
        return text_block(refused)
    description = item.description[:MAX_DESCRIPTION_CHARS] if item.description else None
    return resource_link_block(uri, item.name[:MAX_NAME_CHARS], description, kind)


def _block(item: Any, budget: list[int]) -> Block:
    if isinstance(item, mt.TextContent):
        return text_block(item.text)
    if isinstance(item, mt.ImageContent):
        return _image(item, budget)
    if isinstance(item, mt.AudioContent):
        return _audio(item, budget)
    if isinstance(item, mt.ResourceLink):
        return _link(item)
    if isinstance(item, mt.EmbeddedResource):
        return _resource(item, budget)
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
        # An embedded text resource's text counts with the text blocks', as a client's result's does.
        text = block["data"].get("text")
        if not isinstance(text, str):
            kept.append(block)
            continue
        if len(text) > left:
            note = f"\n[cut: the result's text passed {MAX_RESULT_CHARS:,} characters]"
            text = text[: max(0, left - len(note))] + note
        left -= len(text)
        kept.append({"type": block["type"], "data": block["data"] | {"text": text}})
        if left <= 0:
            break
    return kept


def map_result(result: mt.CallToolResult) -> Mapped:
    """The result as blocks: text, images (PNG, JPEG, WebP, GIF), audio, embedded resources and resource
    links, the bytes within one budget (what is refused is named in text); `structuredContent` as itself
    and, where no text block holds it, as its JSON text too (what a model reads); `isError` as an error."""
    budget = [MAX_IMAGE_BYTES]
    blocks = [_block(item, budget) for item in result.content]
    structured = result.structured_content
    if structured is not None and len(dumps(structured).encode()) > MAX_STRUCTURED_BYTES:
        blocks.append(text_block(f"[structured content left out: past {MAX_STRUCTURED_BYTES:,} bytes as JSON]"))
        structured = None
    if structured is not None and not _holds_json(blocks, structured):
        blocks.append(text_block(dumps(structured)))
    kept = _within_limits(blocks) or [text_block(EMPTY_TEXT)]
    return Mapped(kept, bool(result.is_error), structured)
