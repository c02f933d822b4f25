"""A hostile model server: each wire format's stream made as it is sent (never held whole), far longer than
any bound, and a record of how much of it went out and whether the worker hung up before its end."""

from __future__ import annotations

import contextlib
import gzip
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from common.codec import dumps
from tests.fakes_gemini import GEMINI_PATH
from tests.stack import serve_asgi

Format = Literal["anthropic", "openai_responses", "openai_chat", "gemini"]
FORMATS: tuple[Format, ...] = ("anthropic", "openai_responses", "openai_chat", "gemini")
# What each format's model is told it is (a version's `model`), and its provider's base_url under the fake.
MODELS: dict[Format, dict[str, Any]] = {
    "anthropic": {"format": "anthropic", "model": "claude-test", "max_tokens": 100},
    "openai_responses": {"format": "openai_responses", "model": "gpt-test", "max_tokens": 100, "context_window": 8000},
    "openai_chat": {"format": "openai_chat", "model": "chat-test", "max_tokens": 100, "context_window": 8000},
    "gemini": {"format": "gemini", "model": "gemini-2.5-flash", "max_tokens": 100},
}
CALL = "client__web__highlight_row"
# Events are sent in writes of about this many bytes.
_WRITE = 65_536


@dataclass
class Sent:
    """One answer: the bytes it was made of so far, and how it ended."""

    bytes: int = 0
    finished: bool = False
    # The worker hung up (or the server stopped) before the answer's end.
    cut: bool = False


@dataclass
class Attack:
    """An answer: its events (made lazily, SSE-framed as its format frames them), any headers, and
    whether its bytes go gzipped."""

    events: Callable[[], Iterable[bytes]]
    headers: dict[str, str] = field(default_factory=dict)
    gzipped: bool = False


@dataclass
class HostileServer:
    url: str = ""
    attacks: list[Attack] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    # Each request's headers, as received.
    headers: list[dict[str, str]] = field(default_factory=list)

    def base_url(self, provider_format: Format) -> str:
        return self.url if provider_format in ("anthropic", "gemini") else f"{self.url}/v1"

    async def _answer(self, request: Request) -> Response:
        await request.body()
        self.headers.append(dict(request.headers))
        attack = self.attacks.pop(0)
        sent = Sent()
        self.sent.append(sent)

        async def body() -> AsyncIterator[bytes]:
            try:
                for write in _writes(attack.events()):
                    # uvicorn drops what is sent after a hang-up without a word: ask before each write.
                    if await request.is_disconnected():
                        return
                    out = gzip.compress(write) if attack.gzipped else write
                    sent.bytes += len(out)
                    yield out
                sent.finished = True
            finally:
                sent.cut = not sent.finished

        headers = {**attack.headers, **({"content-encoding": "gzip"} if attack.gzipped else {})}
        return StreamingResponse(body(), media_type="text/event-stream", headers=headers)


def _writes(events: Iterable[bytes]) -> Iterator[bytes]:
    """Events joined into writes of about _WRITE bytes (one event longer than that goes in pieces)."""
    buffer: list[bytes] = []
    held = 0
    for event in events:
        for start in range(0, len(event), _WRITE):
            piece = event[start : start + _WRITE]
            buffer.append(piece)
            held += len(piece)
            if held >= _WRITE:
                yield b"".join(buffer)
                buffer, held = [], 0
    if buffer:
        yield b"".join(buffer)


@contextlib.asynccontextmanager
async def hostile_server() -> AsyncIterator[HostileServer]:
    server = HostileServer()
    paths = ["/v1/messages", "/v1/responses", "/v1/chat/completions", GEMINI_PATH]
    app = Starlette(routes=[Route(path, server._answer, methods=["POST"]) for path in paths])
    async with serve_asgi(app) as url:
        server.url = url
        yield server


def sse(data: Any, event: str | None = None, end: bytes = b"\n\n") -> bytes:
    named = f"event: {event}\n".encode() if event else b""
    return named + b"data: " + (data if isinstance(data, bytes) else dumps(data).encode()) + end


# Each format's stream: a head (what opens the answer), then `count` fragments of one kind, each
# carrying `piece` (text or reasoning, or a piece of one call's arguments), or (`calls`) opening a call
# of its own. The answer never ends well.


def anthropic_stream(kind: str, piece: str, count: int) -> Iterator[bytes]:
    usage = {"input_tokens": 1, "output_tokens": 1}
    message: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                               "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}  # fmt: skip
    yield sse({"type": "message_start", "message": message}, "message_start")
    blocks = {
        "text": ({"type": "text", "text": ""}, {"type": "text_delta", "text": piece}),
        "reasoning": (
            {"type": "thinking", "thinking": "", "signature": ""},
            {"type": "thinking_delta", "thinking": piece},
        ),
        "arguments": (
            {"type": "tool_use", "id": "toolu_1", "name": CALL, "input": {}},
            {"type": "input_json_delta", "partial_json": piece},
        ),
    }
    if kind == "calls":
        for index in range(count):
            opened = {"type": "tool_use", "id": f"toolu_{index}", "name": CALL, "input": {}}
            yield sse({"type": "content_block_start", "index": index, "content_block": opened}, "content_block_start")
        return
    block, delta = blocks[kind]
    yield sse({"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start")
    event = sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
    yield from itertools.repeat(event, count)


def responses_stream(kind: str, piece: str, count: int) -> Iterator[bytes]:
    response = {"id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-test",
                "status": "in_progress", "output": [], "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": []}  # fmt: skip
    yield sse({"type": "response.created", "sequence_number": 0, "response": response}, "response.created")
    if kind == "calls":
        for index in range(count):
            item = {"type": "function_call", "id": f"fc_{index}", "call_id": f"call_{index}", "name": CALL,
                    "arguments": "", "status": "in_progress"}  # fmt: skip
            added = {"type": "response.output_item.added", "output_index": index, "sequence_number": index + 1,
                     "item": item}  # fmt: skip
            yield sse(added, "response.output_item.added")
        return
    if kind == "arguments":
        item = {"type": "function_call", "id": "fc_0", "call_id": "call_1", "name": CALL, "arguments": "",
                "status": "in_progress"}  # fmt: skip
        added = {"type": "response.output_item.added", "output_index": 0, "sequence_number": 1, "item": item}
        yield sse(added, "response.output_item.added")
        name = "response.function_call_arguments.delta"
        delta: dict[str, Any] = {"type": name, "item_id": "fc_0", "output_index": 0, "delta": piece}
    else:
        name = "response.output_text.delta" if kind == "text" else "response.reasoning_summary_text.delta"
        delta = {"type": name, "item_id": "msg_0", "output_index": 0, "content_index": 0, "delta": piece}
        more: dict[str, Any] = {"logprobs": []} if kind == "text" else {"summary_index": 0}
        delta |= more
    yield from itertools.repeat(sse({**delta, "sequence_number": 2}, name), count)


def chat_stream(kind: str, piece: str, count: int) -> Iterator[bytes]:
    def chunk(delta: dict[str, Any]) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "chat-test",
                    "choices": [choice]})  # fmt: skip

    yield chunk({"role": "assistant", "content": ""})
    if kind == "calls":
        for index in range(count):
            call = {"index": index, "id": f"call_{index}", "type": "function",
                    "function": {"name": CALL, "arguments": "{}"}}  # fmt: skip
            yield chunk({"tool_calls": [call]})
        return
    if kind == "arguments":
        yield chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                     "function": {"name": CALL, "arguments": ""}}]})  # fmt: skip
        event = chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    else:
        event = chunk({"content": piece} if kind == "text" else {"reasoning_content": piece})
    yield from itertools.repeat(event, count)


def gemini_chunk(*parts: dict[str, Any], **fields: Any) -> bytes:
    candidate = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    return sse({"candidates": [candidate], "modelVersion": "gemini-2.5-flash-001", **fields}, end=b"\r\n\r\n")


def gemini_stream(kind: str, piece: str, count: int) -> Iterator[bytes]:
    if kind == "calls":
        # All of them in one chunk (each part is a few bytes toward the step's arguments), then text.
        calls = ({"functionCall": {"name": CALL, "args": {}, "id": f"fc_{index}"}} for index in range(count))
        yield gemini_chunk(*calls)
        yield from itertools.repeat(gemini_chunk({"text": "x"}), 100_000)
        return
    if kind == "arguments":
        # Gemini sends each call whole: one call whose arguments hold `count` pieces, then text after it.
        arguments = {"rows": [piece] * count}
        yield gemini_chunk({"functionCall": {"name": CALL, "args": arguments, "id": "fc_1"}})
        yield from itertools.repeat(gemini_chunk({"text": "x"}), 100_000)
        return
    part = {"text": piece, **({"thought": True} if kind == "reasoning" else {})}
    yield from itertools.repeat(gemini_chunk(part), count)


STREAMS: dict[Format, Callable[[str, str, int], Iterator[bytes]]] = {
    "anthropic": anthropic_stream,
    "openai_responses": responses_stream,
    "openai_chat": chat_stream,
    "gemini": gemini_stream,
}


def one_endless_event(provider_format: Format, size: int) -> Iterator[bytes]:
    """One event that holds `size` bytes of text and never ends: what the SDK would read whole."""
    opening = {
        "anthropic": b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"',
        "openai_responses": b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
        b'"item_id":"msg_0","output_index":0,"content_index":0,"delta":"',
        "openai_chat": b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,'
        b'"model":"chat-test","choices":[{"index":0,"delta":{"content":"',
        "gemini": b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"',
    }[provider_format]
    yield opening
    yield from itertools.repeat(b"a" * _WRITE, size // _WRITE)


def junk(provider_format: Format, size: int, count: int) -> Iterator[bytes]:
    """`count` events of about `size` bytes each that carry nothing an adapter keeps: no text, no call."""
    padding = "j" * size
    if provider_format == "anthropic":
        # No event name: the SDK drops it before the adapter could count it.
        event = sse({"type": "junk", "padding": padding})
    elif provider_format == "openai_responses":
        event = sse({"type": "response.in_progress", "sequence_number": 1, "padding": padding}, "response.in_progress")
    elif provider_format == "openai_chat":
        event = sse({"id": padding, "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": []})
    else:
        event = sse({"candidates": [], "responseId": padding}, end=b"\r\n\r\n")
    yield from itertools.repeat(event, count)
