"""Hostile MCP servers, written by hand against the wire (Streamable HTTP at protocol 2025-06-18, or the older
HTTP+SSE transport) so that each does exactly the harm it is for: a tool list of any size, schemas of any
size, a list that never ends or whose pages come slowly, calls answered by keep-alive comments for ever,
after a long silence, by a flood of blank lines or by a large answer held open, a standing stream flooded
with notifications. The tests serve one in their loop (`HostileServer(...).app()`); the benchmark runs one
as a process of its own (`python -m bench.hostile_servers MODE PORT`), so what it costs is not counted
against the worker. The tests import this module; it imports nothing of theirs.

Every server offers the tool `wait` (it answers after `call_s`, or never when 0) besides its padding
tools, answers at `/mcp` and at `/mcp/<anything>` (so one host serves grants of many URLs), and notes what
it saw in its `Seen`."""

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

# `big`: an answer of `answer_bytes`, all but its end at once and the end after `call_s`; `blank_lines`:
# 64 KiB of blank lines on the call's event stream, then nothing.
CallMode = Literal["answer", "keepalive", "blank_lines", "big"]
# What a notification on a standing stream says; its data is padded to `flood_event_bytes`.
_NOTE = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": ""}}


@dataclass
class Hostile:
    """What the server does (the defaults: one tool, answered at once, one page, no GET stream)."""

    tools: int = 0
    schema_chars: int = 0
    endless_list: bool = False
    # Pages of the list, each but the last with a nextCursor (0: pages without end), each after `page_s`.
    pages: int = 1
    page_s: float = 0.0
    call: CallMode = "answer"
    call_s: float = 0.0
    keepalive_s: float = 3.0
    answer_bytes: int = 0
    # `big`: the answer padded with empty lists (a JSON value every 3 bytes) rather than a text.
    answer_values: bool = False
    flood: bool = False
    flood_limit: int = 0
    flood_event_bytes: int = 60
    # The HTTP+SSE transport: one GET stream a session carries every answer and notification (a POST of
    # Streamable HTTP is refused after `init_s`, as `initialize` is answered after it).
    sse: bool = False
    init_s: float = 0.0
    # `initialize` answered with instructions of this many characters.
    instructions: int = 0


@dataclass
class Seen:
    """What the server saw: calls begun and running (the most at once), calls whose stream the client
    closed, listings (first pages) and pages asked for, bytes of list sent, notifications written to a
    standing stream, sessions opened."""

    began: int = 0
    running: int = 0
    most_running: int = 0
    closed: list[float] = field(default_factory=list)
    listings: int = 0
    pages: int = 0
    list_bytes: int = 0
    notified: int = 0
    sessions: int = 0
    # The `_meta` of each listing and call asked for.
    metas: list[dict[str, Any]] = field(default_factory=list)


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


def _done(request_id: Any) -> dict[str, Any]:
    return _envelope(request_id, {"content": [{"type": "text", "text": "done"}], "isError": False})


class HostileServer:
    def __init__(self, hostile: Hostile, seen: Seen | None = None) -> None:
        self.hostile = hostile
        self.seen = seen if seen is not None else Seen()
        tools = [json.dumps(_tool(f"t{number:06d}", hostile.schema_chars)) for number in range(hostile.tools)]
        self._tools = ",".join([json.dumps(WAIT), *tools]).encode()
        self._padding: bytes | None = None
        # HTTP+SSE sessions: what each one's stream has yet to carry.
        self._streams: dict[str, asyncio.Queue[bytes]] = {}

    def app(self) -> Starlette:
        methods = ["GET", "POST", "DELETE"]
        return Starlette(
            routes=[
                Route("/mcp/messages", self._message, methods=["POST"]),
                Route("/mcp", self._endpoint, methods=methods),
                Route("/mcp/{grant}", self._endpoint, methods=methods),
            ]
        )

    async def _endpoint(self, request: Request) -> Response:
        if request.method == "GET":
            if self.hostile.sse:
                return self._session()
            return self._flood() if self.hostile.flood else Response(status_code=405)
        if request.method == "DELETE":
            return Response(status_code=200)
        if self.hostile.sse:
            await asyncio.sleep(self.hostile.init_s)
            return Response(status_code=405)
        body = await request.json()
        request_id, method = body.get("id"), body.get("method")
        if request_id is None:
            return Response(status_code=202)
        if method in ("tools/list", "tools/call"):
            self.seen.metas.append((body.get("params") or {}).get("_meta") or {})
        if method == "initialize":
            answer = await self._answer(request_id, method, body.get("params") or {})
            return JSONResponse(answer, headers={"mcp-session-id": secrets.token_hex(8)})
        if method == "tools/list":
            return await self._list(request_id, body.get("params") or {})
        if method == "tools/call":
            return await self._call(request_id)
        return JSONResponse(await self._answer(request_id, method, body.get("params") or {}))

    async def _answer(self, request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The answer of a request whose answer is plain JSON."""
        if method == "initialize":
            await asyncio.sleep(self.hostile.init_s)
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": True}, "logging": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            if self.hostile.instructions:
                result["instructions"] = "x" * self.hostile.instructions
            return _envelope(request_id, result)
        if method == "ping":
            return _envelope(request_id, {})
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}}

    async def _page(self, request_id: Any, params: dict[str, Any]) -> bytes:
        """One page of the list (not the endless one), after `page_s`."""
        hostile, seen = self.hostile, self.seen
        cursor = params.get("cursor")
        number = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else 0
        seen.listings += number == 0
        seen.pages += 1
        if hostile.page_s:
            await asyncio.sleep(hostile.page_s)
        result: dict[str, Any] = {"tools": []}
        if not hostile.pages or number + 1 < hostile.pages:
            result["nextCursor"] = str(number + 1)
        head = json.dumps(_envelope(request_id, result)).encode()
        # The tools go in the page's list, the first page's only.
        body = head.replace(b'"tools": []', b'"tools":[' + (self._tools if number == 0 else b"") + b"]", 1)
        seen.list_bytes += len(body)
        return body

    async def _list(self, request_id: Any, params: dict[str, Any]) -> Response:
        if not self.hostile.endless_list:
            return Response(await self._page(request_id, params), media_type="application/json")
        self.seen.listings += 1
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":{"tools":['

        async def endless() -> AsyncIterator[bytes]:
            yield head + self._tools
            chunk = b"".join(b"," + json.dumps(_tool(f"e{n:06d}", 0)).encode() for n in range(500))
            while True:
                self.seen.list_bytes += len(chunk)
                yield chunk
                # A send to a client gone returns at once: the loop must get to see that it went.
                await asyncio.sleep(0)

        return StreamingResponse(endless(), media_type="application/json")

    async def _held(self) -> None:
        """The call's wait: `call_s`, or for ever."""
        await asyncio.sleep(self.hostile.call_s) if self.hostile.call_s else await asyncio.Event().wait()

    async def _call(self, request_id: Any) -> Response:
        seen, hostile = self.seen, self.hostile
        seen.began += 1
        if hostile.call == "answer":
            seen.running += 1
            seen.most_running = max(seen.most_running, seen.running)
            try:
                await self._held()
            finally:
                seen.running -= 1
            return JSONResponse(_done(request_id))

        async def streamed() -> AsyncIterator[bytes]:
            seen.running += 1
            seen.most_running = max(seen.most_running, seen.running)
            began = time.monotonic()
            try:
                if hostile.call == "keepalive":
                    while not hostile.call_s or time.monotonic() - began < hostile.call_s:
                        yield b": keep-alive\n\n"
                        await asyncio.sleep(hostile.keepalive_s)
                    yield _event(_done(request_id))
                elif hostile.call == "blank_lines":
                    yield b"\n" * 65536
                    await self._held()
                    yield _event(_done(request_id))
                else:
                    head, padding, tail = self._big(request_id)
                    yield head
                    yield padding
                    await self._held()
                    yield tail
            finally:
                seen.running -= 1
                seen.closed.append(time.monotonic())

        media = "application/json" if hostile.call == "big" else "text/event-stream"
        return StreamingResponse(streamed(), media_type=media)

    def _big(self, request_id: Any) -> tuple[bytes, bytes, bytes]:
        """A call's answer of about `answer_bytes`: its start, its padding (made once, so that hundreds of
        them cost this process little) and its end."""
        size = max(0, self.hostile.answer_bytes - 120)
        start = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":{"content":'
        if self.hostile.answer_values:
            if self._padding is None:
                self._padding = b"[]," * (size // 3)
            return start + b'[],"x":[', self._padding, b'[]],"isError":false}}'
        if self._padding is None:
            self._padding = b"x" * size
        return start + b'[{"type":"text","text":"', self._padding, b'"}],"isError":false}}'

    def _flood(self) -> Response:
        seen, limit = self.seen, self.hostile.flood_limit
        note = {**_NOTE, "params": {"level": "info", "data": "x" * self.hostile.flood_event_bytes}}
        burst = _event(note) * 200

        async def flood() -> AsyncIterator[bytes]:
            while not limit or seen.notified < limit:
                seen.notified += 200
                yield burst
                await asyncio.sleep(0)

        return StreamingResponse(flood(), media_type="text/event-stream")

    def _session(self) -> Response:
        """An HTTP+SSE session's stream: the endpoint to post to, then every answer (and, while a call
        runs with `flood`, notifications of `flood_event_bytes` up to `flood_limit`)."""
        session = secrets.token_hex(8)
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._streams[session] = queue
        self.seen.sessions += 1

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield b"event: endpoint\ndata: /mcp/messages?session=" + session.encode() + b"\n\n"
                while True:
                    yield await queue.get()
            finally:
                del self._streams[session]

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def _message(self, request: Request) -> Response:
        queue = self._streams.get(request.query_params.get("session", ""))
        if queue is None:
            return Response(status_code=404)
        body = await request.json()
        request_id, method, params = body.get("id"), body.get("method"), body.get("params") or {}
        if method in ("tools/list", "tools/call"):
            self.seen.metas.append(params.get("_meta") or {})
        if request_id is not None and method is not None:
            asyncio.get_running_loop().create_task(self._sse_answer(queue, request_id, method, params))
        return Response(status_code=202)

    async def _sse_answer(self, queue: asyncio.Queue[bytes], request_id: Any, method: str, params: Any) -> None:
        hostile, seen = self.hostile, self.seen
        if method == "tools/list":
            page = await self._page(request_id, params)
            queue.put_nowait(b"event: message\ndata: " + page + b"\n\n")
            return
        if method != "tools/call":
            queue.put_nowait(_event(await self._answer(request_id, method, params)))
            return
        seen.began += 1
        if hostile.flood:
            note = _event({**_NOTE, "params": {"level": "info", "data": "x" * hostile.flood_event_bytes}})
            while seen.notified < hostile.flood_limit:
                seen.notified += 1
                queue.put_nowait(note)
                await asyncio.sleep(0)
        await self._held()
        queue.put_nowait(_event(_done(request_id)))


MODES: dict[str, Hostile] = {
    # 60 such calls in one run took another session's round trip from 0.03 s to 23.5 s (the red team's).
    "keepalive": Hostile(call="keepalive", keepalive_s=3.0),
    # 11.6 MB of tools; `wait` answers at once, should a worker take the list.
    "many_tools": Hostile(tools=100_000, call_s=0.01),
    "big_schemas": Hostile(tools=256, schema_chars=53_000, call_s=0.01),
    # The flood runs while a call of `wait` takes 10 s.
    "flood": Hostile(flood=True, call_s=10.0),
    # Pages of the list, without end, each answered after 9.9 s.
    "slow_pages": Hostile(pages=0, page_s=9.9, call_s=0.01),
    # Every call answered with 16 MB of text (about the most one answer may be), its end held back 30 s;
    # grants at many URLs of this one host each hold their calls' answers.
    "big_answers": Hostile(call="big", answer_bytes=16_000_000, call_s=30.0),
    # Every call answered at once with 16 MB of empty lists: a JSON value every 3 bytes.
    "many_values": Hostile(call="big", answer_bytes=16_000_000, answer_values=True, call_s=0.01),
}


def main(argv: list[str]) -> None:
    """`python -m bench.hostile_servers MODE PORT [CALL_S]`: one of MODES on 127.0.0.1:PORT, at /mcp."""
    if len(argv) not in (2, 3) or argv[0] not in MODES:
        raise SystemExit(f"usage: python -m bench.hostile_servers {{{','.join(MODES)}}} PORT [CALL_S]")
    hostile = MODES[argv[0]]
    if len(argv) == 3:
        hostile.call_s = float(argv[2])
    # Stopped, it closes what it still holds at once: uvicorn would wait for every connection to end, and a
    # flood's stream or a slow page never does (10 s of each bench run, until the bench killed it).
    uvicorn.run(
        HostileServer(hostile).app(),
        host="127.0.0.1",
        port=int(argv[1]),
        log_level="warning",
        timeout_graceful_shutdown=0,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
