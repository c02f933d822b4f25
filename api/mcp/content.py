"""A client call's logged result as MCP content."""

from __future__ import annotations

from typing import Any

import mcp.types as mt

from broker.services.calls import CallState
from common.events.catalogue import (
    AudioBlock,
    ImageBlock,
    ResourceBlock,
    ResourceLinkBlock,
    ResultBlock,
    TextBlock,
    ToolResult,
)

# The reason a call's record gives once an approver denied it.
DENIED = "denied"


def error_result(text: str) -> mt.CallToolResult:
    """A tool error with `text` as its one block."""
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)


def _given(value: object) -> Any:
    # An optional field of a block is UNSET when the tool gave none; MCP's is None.
    return value if isinstance(value, str) else None


def mcp_block(block: ResultBlock) -> Any:
    """A logged block as MCP content: each of MCP's content types as itself (a thinking or call block, which
    no result holds, as an empty text)."""
    if isinstance(block, ImageBlock):
        return mt.ImageContent(type="image", data=block.data.data, mime_type=block.data.media_type)
    if isinstance(block, AudioBlock):
        return mt.AudioContent(type="audio", data=block.data.data, mime_type=block.data.media_type)
    if isinstance(block, ResourceBlock):
        data = block.data
        kind = _given(data.media_type)
        resource: mt.TextResourceContents | mt.BlobResourceContents = (
            mt.TextResourceContents(uri=data.uri, mime_type=kind, text=data.text)
            if isinstance(data.text, str)
            else mt.BlobResourceContents(uri=data.uri, mime_type=kind, blob=_given(data.blob) or "")
        )
        return mt.EmbeddedResource(type="resource", resource=resource)
    if isinstance(block, ResourceLinkBlock):
        link = block.data
        # MCP's link needs a name; a tool that gave none is named by its URI.
        return mt.ResourceLink(
            type="resource_link",
            uri=link.uri,
            name=_given(link.name) or link.uri,
            description=_given(link.description),
            mime_type=_given(link.media_type),
        )
    return mt.TextContent(type="text", text=block.data.text if isinstance(block, TextBlock) else "")


def call_result(event: ToolResult, settled: CallState | None) -> mt.CallToolResult:
    content: list[Any] = [mcp_block(block) for block in event.content]
    is_error = event.is_error
    reason = settled.reason if settled is not None else None
    if is_error and reason and reason != DENIED and content and isinstance(content[0], mt.TextContent):
        # The failure reason (client_gone, ack_timeout, result_timeout, run_gone) leads the text; a
        # denial's text is the approver's, as a model reads it.
        content[0] = mt.TextContent(type="text", text=f"{reason}: {content[0].text}")
    structured = event.structured if isinstance(event.structured, dict) else None
    return mt.CallToolResult(content=content, is_error=is_error, structured_content=structured)
