"""Local HTTP servers that speak the Anthropic Messages, OpenAI Responses and Chat Completions wire
formats (tests/fakes_chat.py builds the last's streams), streaming included, answering from a script the
test writes; every request they get is kept for assertions."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from common.codec import dumps
from tests.stack import serve_asgi

Frame = tuple[str, dict[str, Any]]


@dataclass
class Reply:
    """One scripted answer: an error status with a JSON body, or a stream of SSE frames."""

    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    frames: list[Frame] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    # An error answer's body as these bytes instead of `body` (text/plain), e.g. one that is not JSON.
    raw: bytes | None = None
    # Chat Completions' stream: `data:` lines only (a frame's event name is left out), then `data: [DONE]`.
    chat: bool = False
    # The Responses API's echo: each frame's `response` carries the request's tools and instructions, as
    # OpenAI's own server sends them back.
    echo: bool = False


@dataclass
class FakeProvider:
    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def _answer(self, request: Request) -> Response:
        sent = await request.json()
        self.requests.append({"path": request.url.path, "headers": dict(request.headers), **sent})
        if not self.replies:
            return JSONResponse({"error": {"type": "test_error", "message": "no reply was scripted"}}, 500)
        reply = self.replies.pop(0)
        if reply.raw is not None:
            return Response(reply.raw, reply.status, headers=reply.headers, media_type="text/plain")
        if reply.status != 200:
            return JSONResponse(reply.body, reply.status, headers=reply.headers)
        return event_stream(reply, sent)


def _echoing(data: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(data.get("response"), dict):
        return data
    echo = {"tools": sent.get("tools", []), "instructions": sent.get("instructions")}
    return {**data, "response": {**data["response"], **echo}}


def event_stream(reply: Reply, sent: dict[str, Any] | None = None) -> StreamingResponse:
    """A scripted reply's frames as SSE: named events, or Chat Completions' `data:` lines and `[DONE]`;
    with the request `sent` echoed where the reply says so."""

    async def stream() -> AsyncIterator[bytes]:
        for event, frame in reply.frames:
            data = _echoing(frame, sent or {}) if reply.echo else frame
            yield (f"data: {dumps(data)}\n\n" if reply.chat else f"event: {event}\ndata: {dumps(data)}\n\n").encode()
        if reply.chat:
            yield b"data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


@contextlib.asynccontextmanager
async def fake_provider() -> AsyncIterator[FakeProvider]:
    fake = FakeProvider()
    app = Starlette(
        routes=[
            Route("/v1/messages", fake._answer, methods=["POST"]),
            Route("/v1/responses", fake._answer, methods=["POST"]),
            Route("/v1/chat/completions", fake._answer, methods=["POST"]),
        ]
    )
    async with serve_asgi(app) as url:
        fake.url = url
        yield fake


# Anthropic Messages stream frames.


def anthropic_stream(*blocks: dict[str, Any], model: str = "claude-test", stop: str = "end_turn") -> list[Frame]:
    """A whole message: each block given as {"type": "text", "text"}, {"type": "tool_use", "id", "name",
    "input"} or {"type": "thinking", "thinking", "signature"}, streamed in small deltas."""
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    frames: list[Frame] = [("message_start", {"type": "message_start", "message": message})]
    for index, block in enumerate(blocks):
        frames += list(_anthropic_block(index, block))
    delta = {"stop_reason": stop, "stop_sequence": None}
    frames.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 5}}))
    frames.append(("message_stop", {"type": "message_stop"}))
    return frames


def _delta(index: int, delta: dict[str, Any]) -> Frame:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def _anthropic_block(index: int, block: dict[str, Any]) -> Iterator[Frame]:
    kind = block["type"]
    starts = {
        "text": {"type": "text", "text": ""},
        "thinking": {"type": "thinking", "thinking": "", "signature": ""},
        "tool_use": {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": {}},
    }
    yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": starts[kind]}
    if kind == "text":
        for word in _pieces(block["text"]):
            yield _delta(index, {"type": "text_delta", "text": word})
    elif kind == "thinking":
        yield _delta(index, {"type": "thinking_delta", "thinking": block["thinking"]})
        yield _delta(index, {"type": "signature_delta", "signature": block["signature"]})
    else:
        raw = dumps(block["input"])
        for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
            yield _delta(index, {"type": "input_json_delta", "partial_json": part})
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [word + (" " if i < len(words) - 1 else "") for i, word in enumerate(words)]


def anthropic_error(kind: str, message: str) -> Frame:
    return "error", {"type": "error", "error": {"type": kind, "message": message}}


# OpenAI Responses stream frames.


def _output(index: int, item: dict[str, Any]) -> dict[str, Any]:
    if item["type"] == "message":
        content = [{"type": "output_text", "text": item["text"], "annotations": []}]
        return {"type": "message", "id": f"msg_{index}", "role": "assistant", "status": "completed", "content": content}
    if item["type"] == "function_call":
        # `raw_arguments`: the text as sent, for a model that sends arguments that are not JSON.
        arguments = item["raw_arguments"] if "raw_arguments" in item else dumps(item["arguments"])
        return {"type": "function_call", "id": f"fc_{index}", "call_id": item["call_id"], "name": item["name"],
                "arguments": arguments, "status": "completed"}  # fmt: skip
    return {"type": "reasoning", "id": f"rs_{index}", "summary": [{"type": "summary_text", "text": item["summary"]}]}


def openai_stream(*items: dict[str, Any], model: str = "gpt-test") -> list[Frame]:
    """A whole response: items given as {"type": "message", "text"}, {"type": "function_call", "call_id",
    "name", "arguments"} or {"type": "reasoning", "summary"}; message text is streamed as deltas."""
    created = {"type": "response.created", "sequence_number": 0, "response": _response([], model, "in_progress")}
    frames: list[Frame] = [("response.created", created)]
    for index, item in enumerate(items):
        if item["type"] == "message":
            for piece in _pieces(item["text"]):
                delta = {"type": "response.output_text.delta", "item_id": f"msg_{index}", "output_index": index}
                delta |= {"content_index": 0, "delta": piece, "logprobs": [], "sequence_number": len(frames)}
                frames.append(("response.output_text.delta", delta))
        elif item["type"] == "function_call":
            frames += _function_call_frames(index, _output(index, item), len(frames))
    output = [_output(index, item) for index, item in enumerate(items)]
    done = {
        "type": "response.completed",
        "sequence_number": len(frames),
        "response": _response(output, model, "completed"),
    }
    frames.append(("response.completed", done))
    return frames


def openai_message_as_sent(text: str, model: str = "gpt-test") -> list[Frame]:
    """One message as OpenAI's server streams it, every event: the response created and in progress, the
    item and its part added, the text in deltas, then the text again whole in `output_text.done`,
    `content_part.done`, `output_item.done` and `response.completed`."""
    part = {"type": "output_text", "text": text, "annotations": []}
    item = _output(0, {"type": "message", "text": text})
    head = {"item_id": "msg_0", "output_index": 0}
    frames: list[Frame] = [
        ("response.created", {"type": "response.created", "response": _response([], model, "in_progress")}),
        ("response.in_progress", {"type": "response.in_progress", "response": _response([], model, "in_progress")}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                        "item": {**item, "content": [], "status": "in_progress"}}),
        ("response.content_part.added", {"type": "response.content_part.added", **head, "content_index": 0,
                                         "part": {**part, "text": ""}}),
    ]  # fmt: skip
    for start in range(0, len(text), 1_000):
        delta = {"type": "response.output_text.delta", **head, "content_index": 0, "delta": text[start : start + 1_000]}
        frames.append(("response.output_text.delta", {**delta, "logprobs": []}))
    frames += [
        ("response.output_text.done", {"type": "response.output_text.done", **head, "content_index": 0,
                                       "text": text, "logprobs": []}),
        ("response.content_part.done", {"type": "response.content_part.done", **head, "content_index": 0,
                                        "part": part}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": _response([item], model, "completed")}),
    ]  # fmt: skip
    for number, (_, data) in enumerate(frames):
        data["sequence_number"] = number
    return frames


def _function_call_frames(index: int, item: dict[str, Any], sequence: int) -> list[Frame]:
    """A function call as the Responses stream announces it: the item added with no arguments, the
    arguments in two deltas, then done."""
    raw = item["arguments"]
    added = {"type": "response.output_item.added", "output_index": index, "sequence_number": sequence,
             "item": {**item, "arguments": "", "status": "in_progress"}}  # fmt: skip
    frames: list[Frame] = [("response.output_item.added", added)]
    for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
        delta = {"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": index,
                 "delta": part, "sequence_number": sequence + len(frames)}  # fmt: skip
        frames.append(("response.function_call_arguments.delta", delta))
    done = {"type": "response.output_item.done", "output_index": index, "item": item,
            "sequence_number": sequence + len(frames)}  # fmt: skip
    frames.append(("response.output_item.done", done))
    return frames


def _response(output: list[dict[str, Any]], model: str, status: str) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 0, "model": model, "status": status,
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}  # fmt: skip


def openai_failed(code: str, message: str) -> Frame:
    response = {**_response([], "gpt-test", "failed"), "error": {"code": code, "message": message}}
    return "response.failed", {"type": "response.failed", "sequence_number": 1, "response": response}
