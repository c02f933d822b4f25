"""A hostile model server, for the attack tests (tests/security/test_model_stream_attacks.py) and the
bench scenario hostile_model alike: each wire format's stream made as it is sent (never held whole), far
longer than any bound, and a record of how much of each answer went out and whether the worker hung up
before its end.

HTTP/1.1 by hand: each answer's body is ended by closing the connection, written until the peer hangs
up. An answer is the next of the server's `attacks`, or the one its `named` function makes of the path's
first segment (the bench's server, in a process of its own, is told its attacks by the base_url).
`GET /stats` answers the records as JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Format = Literal["anthropic", "openai_responses", "openai_chat", "gemini"]
FORMATS: tuple[Format, ...] = ("anthropic", "openai_responses", "openai_chat", "gemini")
# What each format's model is told it is (a version's `model`).
MODELS: dict[Format, dict[str, Any]] = {
    "anthropic": {"format": "anthropic", "model": "claude-test", "max_tokens": 100},
    "openai_responses": {"format": "openai_responses", "model": "gpt-test", "max_tokens": 100, "context_window": 8000},
    "openai_chat": {"format": "openai_chat", "model": "chat-test", "max_tokens": 100, "context_window": 8000},
    "gemini": {"format": "gemini", "model": "gemini-2.5-flash", "max_tokens": 100},
}
CALL = "client__web__highlight_row"
# Events are sent in writes of about this many bytes.
WRITE = 65_536


@dataclass
class Sent:
    """One answer: which, the bytes it was made of so far, and how it ended."""

    attack: str = ""
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
    # The attack a path's first segment names, when the server is not handed its attacks in order.
    named: Callable[[str], Attack] | None = None
    sent: list[Sent] = field(default_factory=list)
    # Each request's headers, as received (names in lower case).
    headers: list[dict[str, str]] = field(default_factory=list)

    def base_url(self, provider_format: Format) -> str:
        return self.url if provider_format in ("anthropic", "gemini") else f"{self.url}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines[1:] if line)
            }
            await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET" and path == "/stats":
                body = json.dumps([asdict(sent) for sent in self.sent]).encode()
                writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
                             "connection: close\r\n\r\n".encode() + body)  # fmt: skip
                await writer.drain()
                return
            self.headers.append(headers)
            name = path.strip("/").split("/")[0]
            attack = self.named(name) if self.named is not None else self.attacks.pop(0)
            await self._answer(attack, Sent(attack=name), reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _answer(
        self, attack: Attack, sent: Sent, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.sent.append(sent)
        extra = {**attack.headers, **({"content-encoding": "gzip"} if attack.gzipped else {})}
        head = "".join(f"{name}: {value}\r\n" for name, value in extra.items())
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{head}connection: close\r\n\r\n".encode())
        try:
            for write in writes(attack.events()):
                # The worker's hang-up is seen before the next write, not after the kernel's buffers fill.
                if reader.at_eof() or writer.is_closing():
                    return
                out = gzip.compress(write) if attack.gzipped else write
                writer.write(out)
                sent.bytes += len(out)
                await writer.drain()
                await asyncio.sleep(0)
            sent.finished = True
        finally:
            sent.cut = not sent.finished


@contextlib.asynccontextmanager
async def hostile_server(named: Callable[[str], Attack] | None = None) -> AsyncIterator[HostileServer]:
    """The server on a free port of 127.0.0.1, in this loop, for the length of the block."""
    server = HostileServer(named=named)
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    async with listening:
        server.url = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
        yield server


def serve(port: int, named: Callable[[str], Attack]) -> None:
    """Run the server on 127.0.0.1:`port` until killed, each answer the attack its path names."""

    async def main() -> None:
        server = HostileServer(named=named)
        listening = await asyncio.start_server(server.handle, "127.0.0.1", port)
        async with listening:
            await listening.serve_forever()

    asyncio.run(main())


def writes(events: Iterable[bytes]) -> Iterator[bytes]:
    """Events joined into writes of about WRITE bytes (one event longer than that goes in pieces)."""
    buffer: list[bytes] = []
    held = 0
    for event in events:
        for start in range(0, len(event), WRITE):
            piece = event[start : start + WRITE]
            buffer.append(piece)
            held += len(piece)
            if held >= WRITE:
                yield b"".join(buffer)
                buffer, held = [], 0
    if buffer:
        yield b"".join(buffer)


def _json(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def sse(data: Any, event: str | None = None, end: bytes = b"\n\n") -> bytes:
    named = f"event: {event}\n".encode() if event else b""
    return named + b"data: " + (data if isinstance(data, bytes) else _json(data)) + end


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


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "chat-test",
                "choices": [choice]})  # fmt: skip


def chat_stream(kind: str, piece: str, count: int) -> Iterator[bytes]:
    yield _chat_chunk({"role": "assistant", "content": ""})
    if kind == "calls":
        for index in range(count):
            call = {"index": index, "id": f"call_{index}", "type": "function",
                    "function": {"name": CALL, "arguments": "{}"}}  # fmt: skip
            yield _chat_chunk({"tool_calls": [call]})
        return
    if kind == "arguments":
        yield _chat_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                           "function": {"name": CALL, "arguments": ""}}]})  # fmt: skip
        event = _chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    else:
        event = _chat_chunk({"content": piece} if kind == "text" else {"reasoning_content": piece})
    yield from itertools.repeat(event, count)


def chat_benign() -> Iterator[bytes]:
    """A Chat Completions answer in good faith: `fine`, then the end."""
    yield _chat_chunk({"role": "assistant", "content": "fine"})
    yield _chat_chunk({}, "stop")
    yield b"data: [DONE]\n\n"


def gemini_chunk(*parts: dict[str, Any], **fields: Any) -> bytes:
    candidate = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    return sse({"candidates": [candidate], "modelVersion": "gemini-2.5-flash-001", **fields}, end=b"\r\n\r\n")


def gemini_benign() -> Iterator[bytes]:
    """A Gemini answer in good faith: `fine`, then the end."""
    candidate = {"content": {"role": "model", "parts": [{"text": "fine"}]}, "index": 0, "finishReason": "STOP"}
    yield sse({"candidates": [candidate], "modelVersion": "gemini-2.5-flash-001"}, end=b"\r\n\r\n")


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


def held_lines(size: int, line: bytes = b"{a") -> Iterator[bytes]:
    """About `size` bytes of `line`, which is not a `data:` line and opens a brace it never closes, each
    its own event (a blank line after it): tiny events to the event bound, and one buffer to
    google-genai's reader, which holds such lines across events until their braces balance."""
    event = line + b"\n\n"
    block = event * (WRITE // len(event))
    yield from itertools.repeat(block, size // len(block))


def ended_with(events: Iterable[bytes], end: bytes) -> Iterator[bytes]:
    """`events` (each ended by a blank line after LF) each ended by `end` instead."""
    for event in events:
        yield event.removesuffix(b"\n\n") + end


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
    yield from itertools.repeat(b"a" * WRITE, size // WRITE)


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
