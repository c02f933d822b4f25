"""A local HTTP server that answers as the clouds do (docs/providers/clouds.md): Anthropic on Bedrock (its
invoke-with-response-stream path, AWS event-stream framing), Anthropic on Vertex (streamRawPredict, SSE)
and OpenAI on Azure (/openai/responses?api-version=..., SSE), from a script the test writes; every request
is kept for assertions, with its path, query and headers."""

from __future__ import annotations

import base64
import contextlib
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from common.codec import dumps
from tests.fakes import Reply, event_stream
from tests.stack import serve_asgi

BEDROCK_CHUNK_HEADERS = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}


def event_stream_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One message of AWS's event-stream framing (what botocore's EventStreamBuffer reads): the prelude
    (total length, headers length, their CRC32), string headers (type 7), the payload, the CRC32 of all."""
    encoded = b"".join(
        len(name).to_bytes(1, "big") + name.encode() + b"\x07" + len(value).to_bytes(2, "big") + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(encoded).to_bytes(4, "big")
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + encoded + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


def bedrock_chunk(event: dict[str, Any]) -> bytes:
    """An Anthropic stream event as Bedrock sends it: a `chunk` whose payload holds the event's JSON in
    base64 under `bytes`."""
    payload = dumps({"bytes": base64.b64encode(dumps(event).encode()).decode()}).encode()
    return event_stream_message(BEDROCK_CHUNK_HEADERS, payload)


def bedrock_exception(event: str, data: dict[str, Any]) -> bytes:
    """A mid-stream exception as Bedrock sends it (`exception:<type>` in a script): its type in a header,
    its message in the payload."""
    headers = {":message-type": "exception", ":exception-type": event.removeprefix("exception:")}
    return event_stream_message({**headers, ":content-type": "application/json"}, dumps(data).encode())


@dataclass
class FakeCloud:
    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def _take(self, request: Request) -> Reply | Response:
        body = await request.json()
        self.requests.append(
            {"path": request.url.path, "query": dict(request.query_params), "headers": dict(request.headers), **body}
        )
        if not self.replies:
            return JSONResponse({"message": "no reply was scripted"}, 500)
        reply = self.replies.pop(0)
        if reply.status != 200:
            return JSONResponse(reply.body, reply.status, headers=reply.headers)
        return reply

    async def bedrock(self, request: Request) -> Response:
        reply = await self._take(request)
        if isinstance(reply, Response):
            return reply

        async def stream() -> AsyncIterator[bytes]:
            for event, data in reply.frames:
                yield bedrock_exception(event, data) if event.startswith("exception:") else bedrock_chunk(data)

        return StreamingResponse(stream(), media_type="application/vnd.amazon.eventstream")

    async def sse(self, request: Request) -> Response:
        reply = await self._take(request)
        return reply if isinstance(reply, Response) else event_stream(reply)


@contextlib.asynccontextmanager
async def fake_cloud() -> AsyncIterator[FakeCloud]:
    fake = FakeCloud()
    app = Starlette(
        routes=[
            Route("/model/{model}/invoke-with-response-stream", fake.bedrock, methods=["POST"]),
            # Vertex's `models/{model}:streamRawPredict`: the colon is inside the last segment.
            Route(
                "/v1/projects/{project}/locations/{location}/publishers/anthropic/models/{rest}",
                fake.sse,
                methods=["POST"],
            ),
            Route("/openai/responses", fake.sse, methods=["POST"]),
            Route("/openai/deployments/{deployment}/chat/completions", fake.sse, methods=["POST"]),
        ]
    )
    async with serve_asgi(app) as url:
        fake.url = url
        yield fake
