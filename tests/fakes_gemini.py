"""A local server that speaks Gemini's streamGenerateContent (the Gemini API's path and Vertex AI's),
answering from a script the test writes with SSE `data:` frames shaped as the REST reference shapes a
GenerateContentResponse; every request it gets is kept for assertions."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from common.codec import dumps
from tests.fakes import Reply
from tests.stack import serve_asgi

GEMINI_PATH = "/v1beta/models/{model}:streamGenerateContent"
VERTEX_PATH = "/v1beta1/projects/{project}/locations/{location}/publishers/google/models/{model}:streamGenerateContent"


# Fields whose values are the caller's data, not the API's names: kept as sent.
_DATA = {"args", "response", "parametersJsonSchema"}


def camel(value: Any) -> Any:
    """A request body with each API field named in lowerCamelCase. The API (a proto3 JSON parser) takes
    a field by either name, and the SDK sends some under their proto names (`thinking_budget`,
    `parameters_json_schema`, `inline_data`): the fake reads them as the API does."""
    if isinstance(value, list):
        return [camel(item) for item in value]
    if not isinstance(value, dict):
        return value
    named = {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key): item for key, item in value.items()}
    return {key: item if key in _DATA else camel(item) for key, item in named.items()}


@dataclass
class FakeGemini:
    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    # Each request: its path, query, headers, and JSON body (`raw` as sent, `body` read as the API reads it).
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def _answer(self, request: Request) -> Response:
        seen = {"path": request.url.path, "query": request.url.query, "headers": dict(request.headers)}
        raw = await request.json()
        self.requests.append({**seen, "raw": raw, "body": camel(raw)})
        if not self.replies:
            return JSONResponse(error(500, "INTERNAL", "no reply was scripted"), 500)
        reply = self.replies.pop(0)
        if reply.status != 200:
            return JSONResponse(reply.body, reply.status, headers=reply.headers)

        async def stream() -> AsyncIterator[bytes]:
            for kind, data in reply.frames:
                # A frame of kind "raw" sends its `raw` text as it is (one that is not JSON); of kind "bare",
                # its `raw` text alone, no `data: ` and no blank line (as Vertex AI sends an error mid-stream).
                if kind == "bare":
                    yield data["raw"].encode()
                    continue
                yield f"data: {data['raw'] if kind == 'raw' else dumps(data)}\r\n\r\n".encode()

        return StreamingResponse(stream(), media_type="text/event-stream")


@contextlib.asynccontextmanager
async def fake_gemini() -> AsyncIterator[FakeGemini]:
    fake = FakeGemini()
    routes = [Route(path, fake._answer, methods=["POST"]) for path in (GEMINI_PATH, VERTEX_PATH)]
    async with serve_asgi(Starlette(routes=routes)) as url:
        fake.url = url
        yield fake


def error(code: int, status: str, message: str, **extra: Any) -> dict[str, Any]:
    """A Google API error body (google.rpc.Status as JSON)."""
    return {"error": {"code": code, "message": message, "status": status, **extra}}


def chunk(*parts: dict[str, Any], finish: str | None = None, **fields: Any) -> dict[str, Any]:
    """One GenerateContentResponse of a stream: its candidate's parts, as the wire names them (`text`,
    `thought`, `thoughtSignature`, `functionCall` {name, args, id?}), and its finishReason."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash-001", **fields}


def usage(prompt: int, candidates: int, thoughts: int | None = None, cached: int | None = None) -> dict[str, Any]:
    counts = {"promptTokenCount": prompt, "candidatesTokenCount": candidates}
    counts["totalTokenCount"] = prompt + candidates + (thoughts or 0)
    if thoughts is not None:
        counts["thoughtsTokenCount"] = thoughts
    if cached is not None:
        counts["cachedContentTokenCount"] = cached
    return counts


def gemini_stream(*chunks: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A reply's frames: one `data:` frame per chunk."""
    return [("", data) for data in chunks]


def text_stream(text: str, *, prompt: int = 7, output: int = 3) -> list[tuple[str, dict[str, Any]]]:
    """Text in word-sized chunks, the last with STOP and the usage counts."""
    words = text.split(" ")
    pieces = [word + (" " if i < len(words) - 1 else "") for i, word in enumerate(words)]
    chunks = [chunk({"text": piece}) for piece in pieces[:-1]]
    chunks.append(chunk({"text": pieces[-1]}, finish="STOP", usageMetadata=usage(prompt, output)))
    return gemini_stream(*chunks)
