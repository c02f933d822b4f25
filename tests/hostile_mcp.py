"""Hostile MCP servers, written by hand against the Streamable HTTP wire (protocol 2025-06-18) so that each
does exactly the harm it is for: a tool list of any size, schemas of any size, a list that never ends,
calls answered by keep-alive comments for ever or after a long silence, a GET stream flooded with
notifications. The tests serve one in their loop (`app`); the benchmark runs one as a process of its own
(`python -m tests.hostile_mcp MODE PORT`), so what it costs is not counted against the worker.

Every server offers the tool `wait` (it answers after `call_s`, or never when 0) besides its padding
tools, and notes what it saw in its `Seen`."""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

CallMode = Literal["answer", "keepalive"]


@dataclass
class Hostile:
    """What the server does (the defaults: one tool, answered at once, no GET stream)."""

    tools: int = 0
    schema_chars: int = 0
    endless_list: bool = False
    call: CallMode = "answer"
    call_s: float = 0.0
    keepalive_s: float = 3.0
    flood: bool = False
    flood_limit: int = 0


@dataclass
class Seen:
    """What the server saw: calls begun and running (the most at once), calls whose stream the client
    closed, bytes of list sent, notifications written to the GET stream."""

    began: int = 0
    running: int = 0
    most_running: int = 0
    closed: list[float] = field(default_factory=list)
    list_bytes: int = 0
    notified: int = 0


def _tool(name: str, schema_chars: int) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if schema_chars:
        width = 1000
        for number in range(max(1, schema_chars // (width + 40))):
            properties[f"p{number}"] = {"type": "string", "description": "x" * width}
    return {
        "name": name,
        "description": f"the padding tool {name}",
        "inputSchema": {"type": "object", "properties": properties},
    }


WAIT = {"name": "wait", "description": "Answers after a while, or never", "inputSchema": {"type": "object"}}


def _envelope(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


class HostileServer:
    def __init__(self, hostile: Hostile, seen: Seen | None = None) -> None:
        self.hostile = hostile
        self.seen = seen if seen is not None else Seen()
        tools = [json.dumps(_tool(f"t{number:06d}", hostile.schema_chars)) for number in range(hostile.tools)]
        self._tools = ",".join([json.dumps(WAIT), *tools]).encode()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/mcp", self._endpoint, methods=["GET", "POST", "DELETE"])])

    async def _endpoint(self, request: Request) -> Response:
        if request.method == "GET":
            return self._stream() if self.hostile.flood else Response(status_code=405)
        if request.method == "DELETE":
            return Response(status_code=200)
        body = await request.json()
        request_id, method = body.get("id"), body.get("method")
        if request_id is None:
            return Response(status_code=202)
        if method == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": True}, "logging": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            return JSONResponse(_envelope(request_id, result), headers={"mcp-session-id": secrets.token_hex(8)})
        if method == "tools/list":
            return self._list(request_id)
        if method == "tools/call":
            return await self._call(request_id)
        if method == "ping":
            return JSONResponse(_envelope(request_id, {}))
        error = {"code": -32601, "message": f"no method {method}"}
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})

    def _list(self, request_id: Any) -> Response:
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":{"tools":['
        if not self.hostile.endless_list:
            body = head + self._tools + b"]}}"
            self.seen.list_bytes += len(body)
            return Response(body, media_type="application/json")

        async def endless() -> AsyncIterator[bytes]:
            yield head + self._tools
            chunk = b"".join(b"," + json.dumps(_tool(f"e{n:06d}", 0)).encode() for n in range(500))
            while True:
                self.seen.list_bytes += len(chunk)
                yield chunk
                # A send to a client gone returns at once: the loop must get to see that it went.
                await asyncio.sleep(0)

        return StreamingResponse(endless(), media_type="application/json")

    async def _call(self, request_id: Any) -> Response:
        seen, hostile = self.seen, self.hostile
        answer = _envelope(request_id, {"content": [{"type": "text", "text": "done"}], "isError": False})
        seen.began += 1
        if hostile.call == "answer":
            seen.running += 1
            seen.most_running = max(seen.most_running, seen.running)
            try:
                await asyncio.sleep(hostile.call_s) if hostile.call_s else await asyncio.Event().wait()
            finally:
                seen.running -= 1
            return JSONResponse(answer)

        async def keepalive() -> AsyncIterator[bytes]:
            seen.running += 1
            seen.most_running = max(seen.most_running, seen.running)
            began = time.monotonic()
            try:
                while not hostile.call_s or time.monotonic() - began < hostile.call_s:
                    yield b": keep-alive\n\n"
                    await asyncio.sleep(hostile.keepalive_s)
                yield _event(answer)
            finally:
                seen.running -= 1
                seen.closed.append(time.monotonic())

        return StreamingResponse(keepalive(), media_type="text/event-stream")

    def _stream(self) -> Response:
        seen, limit = self.seen, self.hostile.flood_limit
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x" * 60}}
        burst = _event(note) * 200

        async def flood() -> AsyncIterator[bytes]:
            while not limit or seen.notified < limit:
                seen.notified += 200
                yield burst
                await asyncio.sleep(0)

        return StreamingResponse(flood(), media_type="text/event-stream")


MODES: dict[str, Hostile] = {
    # 60 such calls in one run took another session's round trip from 0.03 s to 23.5 s (the red team's).
    "keepalive": Hostile(call="keepalive", keepalive_s=3.0),
    # 11.6 MB of tools; `wait` answers at once, should a worker take the list.
    "many_tools": Hostile(tools=100_000, call_s=0.01),
    "big_schemas": Hostile(tools=256, schema_chars=53_000, call_s=0.01),
    # The flood runs while a call of `wait` takes 10 s.
    "flood": Hostile(flood=True, call_s=10.0),
}


def main(argv: list[str]) -> None:
    """`python -m tests.hostile_mcp MODE PORT [CALL_S]`: one of MODES on 127.0.0.1:PORT, at /mcp."""
    if len(argv) not in (2, 3) or argv[0] not in MODES:
        raise SystemExit(f"usage: python -m tests.hostile_mcp {{{','.join(MODES)}}} PORT [CALL_S]")
    hostile = MODES[argv[0]]
    if len(argv) == 3:
        hostile.call_s = float(argv[2])
    uvicorn.run(HostileServer(hostile).app(), host="127.0.0.1", port=int(argv[1]), log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
