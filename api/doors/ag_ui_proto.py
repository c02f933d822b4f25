"""AG-UI's binary encoding (`application/vnd.ag-ui.event+proto`), for a client that asks for it: each
event as the `Event` envelope of `@ag-ui/proto` 1.0, after its length (4 bytes, big-endian).

The `ag-ui-protocol` package has no protobuf encoder, so the events this door sends are written here by
their field numbers (those of the published `.proto`, as `@ag-ui/proto` 1.0.0 encodes them); the tests
decode them with `@ag-ui/proto` itself.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ag_ui.core import BaseEvent, EventType

MEDIA_TYPE = "application/vnd.ag-ui.event+proto"

# Each event type: its field in the `Event` envelope, and its number in the `EventType` enum.
_ENVELOPE: dict[EventType, tuple[int, int]] = {
    EventType.TEXT_MESSAGE_START: (1, 0),
    EventType.TEXT_MESSAGE_CONTENT: (2, 1),
    EventType.TEXT_MESSAGE_END: (3, 2),
    EventType.TOOL_CALL_START: (4, 3),
    EventType.TOOL_CALL_ARGS: (5, 4),
    EventType.TOOL_CALL_END: (6, 5),
    EventType.MESSAGES_SNAPSHOT: (9, 8),
    EventType.CUSTOM: (11, 10),
    EventType.RUN_STARTED: (12, 11),
    EventType.RUN_FINISHED: (13, 12),
    EventType.RUN_ERROR: (14, 13),
    EventType.STEP_STARTED: (15, 14),
    EventType.STEP_FINISHED: (16, 15),
    EventType.TOOL_CALL_RESULT: (22, 21),
    EventType.REASONING_START: (25, 24),
    EventType.REASONING_MESSAGE_START: (26, 25),
    EventType.REASONING_MESSAGE_CONTENT: (27, 26),
    EventType.REASONING_MESSAGE_END: (28, 27),
    EventType.REASONING_END: (30, 29),
}

# The string fields of each event's message, by number (field 1 is always the base event).
_STRINGS: dict[EventType, tuple[tuple[int, str], ...]] = {
    EventType.TEXT_MESSAGE_START: ((2, "message_id"), (3, "role"), (4, "name")),
    EventType.TEXT_MESSAGE_CONTENT: ((2, "message_id"), (3, "delta")),
    EventType.TEXT_MESSAGE_END: ((2, "message_id"),),
    EventType.TOOL_CALL_START: ((2, "tool_call_id"), (3, "tool_call_name"), (4, "parent_message_id")),
    EventType.TOOL_CALL_ARGS: ((2, "tool_call_id"), (3, "delta")),
    EventType.TOOL_CALL_END: ((2, "tool_call_id"),),
    EventType.MESSAGES_SNAPSHOT: (),
    EventType.CUSTOM: ((2, "name"),),
    EventType.RUN_STARTED: ((2, "thread_id"), (3, "run_id"), (4, "parent_run_id"), (6, "protocol_version")),
    EventType.RUN_FINISHED: ((2, "thread_id"), (3, "run_id")),
    EventType.RUN_ERROR: ((2, "code"), (3, "message")),
    EventType.STEP_STARTED: ((2, "step_name"),),
    EventType.STEP_FINISHED: ((2, "step_name"),),
    EventType.TOOL_CALL_RESULT: ((3, "message_id"), (4, "tool_call_id"), (5, "content"), (6, "role")),
    EventType.REASONING_START: ((3, "message_id"),),
    EventType.REASONING_MESSAGE_START: ((3, "message_id"), (4, "role")),
    EventType.REASONING_MESSAGE_CONTENT: ((3, "message_id"), (4, "delta")),
    EventType.REASONING_MESSAGE_END: ((3, "message_id"),),
    EventType.REASONING_END: ((3, "message_id"),),
}


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes(field: int, body: bytes) -> bytes:
    return _tag(field, 2) + _varint(len(body)) + body


def _string(field: int, text: str) -> bytes:
    return _bytes(field, text.encode())


def _value(value: Any) -> bytes:
    """google.protobuf.Value."""
    if value is None:
        return _tag(1, 0) + _varint(0)
    if isinstance(value, bool):
        return _tag(4, 0) + _varint(int(value))
    if isinstance(value, int | float):
        return _tag(2, 1) + struct.pack("<d", float(value))
    if isinstance(value, str):
        return _string(3, value)
    if isinstance(value, dict):
        return _bytes(5, _struct(value))
    if isinstance(value, list | tuple):
        return _bytes(6, b"".join(_bytes(1, _value(item)) for item in value))
    return _string(3, str(value))


def _struct(fields: dict[str, Any]) -> bytes:
    return b"".join(_bytes(1, _string(1, str(key)) + _bytes(2, _value(item))) for key, item in fields.items())


def _interrupt(interrupt: dict[str, Any]) -> bytes:
    body = b"".join(
        _string(number, interrupt[name])
        for number, name in ((1, "id"), (2, "reason"), (3, "message"), (4, "tool_call_id"), (6, "expires_at"))
        if interrupt.get(name) is not None
    )
    if interrupt.get("response_schema") is not None:
        body += _bytes(5, _value(interrupt["response_schema"]))
    if interrupt.get("metadata") is not None:
        body += _bytes(7, _value(interrupt["metadata"]))
    return body


def _run_finished(event: dict[str, Any]) -> bytes:
    outcome = event.get("outcome") or {"type": "success"}
    body = _string(5, outcome["type"])
    body += b"".join(_bytes(6, _interrupt(interrupt)) for interrupt in outcome.get("interrupts") or [])
    body += b"".join(_string(8, call_id) for call_id in outcome.get("pending_tool_call_ids") or [])
    if event.get("result") is not None:
        body += _bytes(4, _value(event["result"]))
    return body


def _message(message: dict[str, Any]) -> bytes:
    body = b"".join(
        _string(number, message[name])
        for number, name in ((1, "id"), (2, "role"), (4, "name"), (6, "tool_call_id"), (7, "error"))
        if message.get(name) is not None
    )
    content = message.get("content")
    if isinstance(content, str):
        body += _string(3, content)
    for call in message.get("tool_calls") or []:
        function = _string(1, call["function"]["name"]) + _string(2, call["function"]["arguments"])
        body += _bytes(5, _string(1, call["id"]) + _string(2, call.get("type", "function")) + _bytes(3, function))
    return body


_EXTRA: dict[EventType, Callable[[dict[str, Any]], bytes]] = {
    EventType.RUN_FINISHED: _run_finished,
    EventType.CUSTOM: lambda event: _bytes(3, _value(event.get("value"))),
    EventType.MESSAGES_SNAPSHOT: lambda event: b"".join(_bytes(2, _message(m)) for m in event.get("messages") or []),
}


def encode_event(event: BaseEvent) -> bytes:
    """One event, framed: its length, then the envelope holding it."""
    kind = EventType(event.type)
    field, number = _ENVELOPE[kind]
    fields = event.model_dump(by_alias=False, mode="json")
    body = _bytes(1, _tag(1, 0) + _varint(number)) if number else _bytes(1, b"")
    body += b"".join(_string(n, fields[name]) for n, name in _STRINGS[kind] if fields.get(name) is not None)
    extra = _EXTRA.get(kind)
    if extra is not None:
        body += extra(fields)
    envelope = _bytes(field, body)
    return struct.pack(">I", len(envelope)) + envelope
