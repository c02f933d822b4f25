"""A client call's logged result as MCP content."""

from __future__ import annotations

from typing import Any

import mcp.types as mt

from broker.services.calls import CallState
from common.events.catalogue import ImageBlock, TextBlock, ToolResult

# The reason a call's record gives once an approver denied it.
DENIED = "denied"


def error_result(text: str) -> mt.CallToolResult:
    """A tool error with `text` as its one block."""
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)


def call_result(event: ToolResult, settled: CallState | None) -> mt.CallToolResult:
    content: list[Any] = []
    for block in event.content:
        if isinstance(block, ImageBlock):
            content.append(mt.ImageContent(type="image", data=block.data.data, mime_type=block.data.media_type))
        else:
            text = block.data.text if isinstance(block, TextBlock) else ""
            content.append(mt.TextContent(type="text", text=text))
    is_error = event.is_error
    reason = settled.reason if settled is not None else None
    if is_error and reason and reason != DENIED and content and isinstance(content[0], mt.TextContent):
        # The failure reason (client_gone, ack_timeout, result_timeout, run_gone) leads the text; a
        # denial's text is the approver's, as a model reads it.
        content[0] = mt.TextContent(type="text", text=f"{reason}: {content[0].text}")
    return mt.CallToolResult(content=content, is_error=is_error)
