"""Session events built on the Python side, as the JSON bodies the scripts append (without seq).

The scripts splice `seq` and `created_at` in front. Events that only a script can know the content of
(`client_left`, `client_tool_failed`, `run_*`, ...) are built by the scripts, with the builders generated
from the catalogue (`lua/lib/events.lua`). The 20 types the SDK knows are `SDK_EVENT_TYPES`
(common.events.catalogue declares every type); the default stream carries nothing else.

A builder makes the catalogue's record and encodes it (`common.events.read.encode`) where that costs no
more than writing a dict (the progress events: 0.46 µs against 0.48). The others still write a dict
with orjson, in the declared order (tests/unit/test_event_catalogue.py reads each back byte for byte),
measured: orjson writes a long string about five times as fast as msgspec (a 64 KiB tool result: 11 µs
against 52 µs; 4 KiB: 1.4 against 2.5), a record of blocks that arrive as dicts costs a `msgspec.convert`
(10 µs more), a step's timing with its nested payload 0.9 µs against 1.2; and a model's arguments keep
the bytes written so far (orjson writes a float past 1e16 as `1e+16`, msgspec as `1e16`).
"""

from __future__ import annotations

from typing import Any, get_args

from common.codec import canonical_json, dumps, sha256_hex
from common.events.catalogue import SDK_EVENT_TYPES as SDK_EVENT_TYPES
from common.events.catalogue import (
    ClientToolProgress,
    ImageMediaType,
    InputSource,
    MessageBody,
    MessageUser,
    TextBlock,
    TextData,
    ToolProgress,
)
from common.events.read import encode

Block = dict[str, Any]


def text_block(text: str) -> Block:
    return {"type": "text", "data": {"text": text}}


def tool_call_block(call_id: str, name: str, arguments: dict[str, Any]) -> Block:
    return {"type": "tool_call", "data": {"id": call_id, "name": name, "arguments": arguments}}


def thinking_block(thinking: str, *, redacted: bool = False, signature: str | None = None) -> Block:
    return {"type": "thinking", "data": {"thinking": thinking, "redacted": redacted, "signature": signature}}


def message_user(text: str, source: InputSource) -> str:
    return encode(MessageUser(message=MessageBody(role="user", content=[TextBlock(TextData(text))]), source=source))


def message_assistant(content: list[Block], model: str | None) -> str:
    message = {"role": "assistant", "content": content, "model": model}
    return dumps({"type": "message_assistant", "message": message})


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> str:
    return dumps({"type": "tool_call", "call_id": call_id, "name": name, "arguments": arguments})


def tool_result(call_id: str, text: str, *, is_error: bool) -> str:
    return tool_result_blocks(call_id, [text_block(text)], is_error=is_error)


def tool_result_blocks(
    call_id: str, content: list[Block], *, is_error: bool, structured: dict[str, Any] | None = None
) -> str:
    """`structured` (an extension): the result as a JSON object too (MCP's structuredContent)."""
    event = {"type": "tool_result", "call_id": call_id, "content": content, "is_error": is_error}
    return dumps(event if structured is None else event | {"structured": structured})


# What one tool result may hold, whoever answers it (a client's result route, an MCP server): its text in
# all, its images decoded in all, its blocks.
MAX_RESULT_CHARS = 65_536
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_RESULT_BLOCKS = 16
IMAGE_TYPES: tuple[str, ...] = get_args(ImageMediaType)


def image_block(media_type: str, data: str) -> Block:
    return {"type": "image", "data": {"media_type": media_type, "data": data}}


def image_text(media_type: str, data: str) -> str:
    """What names an image where only text goes: `[image/png, 48 KB]` (`data` its base64)."""
    size = len(data) * 3 // 4
    return f"[{media_type}, {max(1, round(size / 1024))} KB]"


def client_tool_dispatched(
    client_id: str,
    call_id: str,
    tool: str,
    arguments: dict[str, Any],
    source: str | None = None,
    traceparent: str | None = None,
) -> str:
    """`source` (an extension): where a call no run made came from (`mcp`: /v1/sessions/{sid}/mcp);
    `traceparent` (an extension): the call's span, when the deployment traces."""
    event: dict[str, Any] = {"type": "client_tool_dispatched", "client_id": client_id, "call_id": call_id}
    event["tool"] = tool
    event["arguments"] = arguments
    if source:
        event["from"] = source
    if traceparent:
        event["traceparent"] = traceparent
    return dumps(event)


def args_hash(arguments: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of the arguments (docs/architecture.md, Decisions the code relies on)."""
    return sha256_hex(canonical_json(arguments))


def approval_requested(
    call_id: str, server: str, tool: str, arguments: dict[str, Any], source: str | None = None
) -> str:
    """The `approval_requested` JSON of a call; `source` (an extension, as `client_tool_dispatched`'s
    `from`): where a call no run made came from (`mcp`)."""
    event: dict[str, Any] = {"type": "approval_requested", "call_id": call_id, "server": server, "tool": tool}
    event["arguments"] = arguments
    event["args_hash"] = args_hash(arguments)
    return dumps(event | ({"from": source} if source else {}))


def step_timing(payload: dict[str, object]) -> str:
    """A step's timing event: shown only to readers that ask (`is_timing`)."""
    return dumps({"type": "custom", "kind": "timing", "payload": payload})


def tool_progress(call_id: str, server: str, tool: str, message: str | None, fraction: float | None) -> str:
    """An MCP server's progress on a server call: `server` the grant's name, `tool` the MCP tool's."""
    return encode(ToolProgress(call_id=call_id, server=server, tool=tool, message=message, fraction=fraction))


def client_tool_progress(client_id: str, call_id: str, message: str | None, fraction: float | None) -> str:
    return encode(ClientToolProgress(client_id=client_id, call_id=call_id, message=message, fraction=fraction))
