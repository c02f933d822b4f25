"""MCP servers for the tests, built with the official `mcp` package: a kit of tools with text, image,
audio, resource and structured results, one that reports progress, one that fails, one that hangs, one that changes the
list, one that crashes the server (over stdio: the process exits) and one whose annotations say it is
destructive. Served over Streamable HTTP or HTTP+SSE on a free port in the test's loop, or over stdio
(`python -m tests.mcp_servers`); a server in another process notes what it began and what was cancelled
in the file `$MCP_KIT_NOTES` names, if set."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import queue
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp.types as mt
import uvicorn
from mcp.server import MCPServer
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from starlette.applications import Starlette
from starlette.routing import Mount

from tests.stack import serve_asgi

# A 1x1 PNG (one red pixel).
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
        "0000000d49444154789c63f8cfc0f01f00050001ff89993d1d0000000049454e44ae426082"
    )
).decode()
# A few bytes of audio and of a PDF, as the rich tool returns them.
WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()
PDF = base64.b64encode(b"%PDF-1.7 not really").decode()
NOTES_ENV = "MCP_KIT_NOTES"
ERASE_HINTS = ToolAnnotations(title="Erase a note", read_only_hint=False, destructive_hint=True)


def _mark(line: str) -> None:
    """A line in the notes file, for a test that runs the kit in another process."""
    path = os.environ.get(NOTES_ENV)
    if path:
        with open(path, "a") as notes:
            notes.write(line + "\n")


@dataclass
class Seen:
    """What the server saw: the calls it began, those cancelled, the headers of its requests."""

    began: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    # The `_meta` of each call it began (a traced deployment's `traceparent` among it).
    metas: list[dict[str, Any]] = field(default_factory=list)


class _Kit:
    """The kit's tools, noting what they see in `seen`."""

    def __init__(self, server: MCPServer, seen: Seen) -> None:
        self._server = server
        self._seen = seen

    def _note(self, ctx: Context, name: str) -> None:
        self._seen.began.append(name)
        _mark(f"began {name}")
        with contextlib.suppress(Exception):
            if ctx.headers is not None:
                self._seen.headers.append({k.lower(): v for k, v in ctx.headers.items()})
        with contextlib.suppress(Exception):
            self._seen.metas.append(dict(ctx.request_context.meta or {}))

    def add(self, a: int, b: int, ctx: Context) -> int:
        """Add two numbers."""
        self._note(ctx, "add")
        return a + b

    def picture(self, ctx: Context) -> CallToolResult:
        """A red pixel, and a word about it."""
        self._note(ctx, "picture")
        pixel = ImageContent(type="image", data=PIXEL, mime_type="image/png")
        return CallToolResult(content=[TextContent(type="text", text="a red pixel"), pixel])

    def rich(self, ctx: Context) -> CallToolResult:
        """Audio, an embedded text resource, a PDF, a link and structured content."""
        self._note(ctx, "rich")
        return CallToolResult(
            content=[
                TextContent(type="text", text="all kinds"),
                mt.AudioContent(type="audio", data=WAV, mime_type="audio/wav"),
                mt.EmbeddedResource(
                    type="resource",
                    resource=mt.TextResourceContents(uri="mem://notes/1", mime_type="text/plain", text="the note"),
                ),
                mt.EmbeddedResource(
                    type="resource",
                    resource=mt.BlobResourceContents(uri="file:///r.pdf", mime_type="application/pdf", blob=PDF),
                ),
                mt.ResourceLink(type="resource_link", uri="https://example.com/r", name="report", description="It"),
            ],
            structured_content={"kinds": 5},
        )

    async def slow(self, steps: int, ctx: Context) -> str:
        """Takes a while, and says how far it is."""
        self._note(ctx, "slow")
        for step in range(steps):
            await ctx.report_progress(step + 1, steps, f"step {step + 1} of {steps}")
            await asyncio.sleep(0.6)
        return f"{steps} steps done"

    def fails(self, ctx: Context) -> str:
        """Always fails."""
        self._note(ctx, "fails")
        raise ToolError("the kit broke")

    async def hangs(self, ctx: Context) -> str:
        """Never answers."""
        self._note(ctx, "hangs")
        try:
            await asyncio.Event().wait()
        except BaseException:
            self._seen.cancelled.append("hangs")
            _mark("cancelled hangs")
            raise
        return "never"

    async def grow(self, ctx: Context) -> str:
        """Adds a tool named extra, and says the list changed."""
        self._note(ctx, "grow")
        self._server.add_tool(extra)
        with contextlib.suppress(Exception):
            await ctx.notify_tools_changed()
        with contextlib.suppress(Exception):
            await ctx.session.send_tool_list_changed()
        return "grown"

    def crash(self, ctx: Context) -> str:
        """Ends the server's process at once (exit 3), as a crash would."""
        self._note(ctx, "crash")
        os._exit(3)

    def erase(self, note: str, ctx: Context) -> str:
        """Erases a note; its annotations say it is destructive."""
        self._note(ctx, "erase")
        return f"erased {note}"


def extra() -> str:
    """Here since grow was called."""
    return "extra"


def kit(seen: Seen | None = None) -> MCPServer:
    server = MCPServer("kit")
    tools = _Kit(server, seen if seen is not None else Seen())
    for tool in (tools.add, tools.picture, tools.rich, tools.slow, tools.fails, tools.hangs, tools.grow, tools.crash):
        server.add_tool(tool)
    server.add_tool(tools.erase, annotations=ERASE_HINTS)
    return server


_ODD_TOOLS = [
    mt.Tool(name="plain", description="An ordinary tool beside the odd ones", input_schema={"type": "object"}),
    mt.Tool(name="bad name!", description="A name no model may be given", input_schema={"type": "object"}),
    mt.Tool(name="wordy", description="w" * 10_000, input_schema={"type": "object"}),
    mt.Tool(name="fetches", input_schema={"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/x"}}}),
    mt.Tool(name="too_big", description="Answers far more than a result may hold", input_schema={"type": "object"}),
]


async def _odd_list(ctx: Any, params: Any) -> mt.ListToolsResult:
    return mt.ListToolsResult(tools=_ODD_TOOLS)


def odd_app(seen: Seen | None = None) -> Starlette:
    """A server (the `mcp` package's low-level one, which declares any schema) whose tools a worker must
    not take as they are: a name no model may see, a description of 10,000 characters, a schema that
    refers to a URL, and an answer of 20 MiB. Streamable HTTP at /mcp; the calls it begins are noted in
    `seen`."""
    began = seen.began if seen is not None else []

    async def odd_call(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        began.append(params.name)
        text = "x" * (20 * 1024 * 1024) if params.name == "too_big" else params.name
        return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)])

    manager = StreamableHTTPSessionManager(Server("odd", on_list_tools=_odd_list, on_call_tool=odd_call))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)


Transport = Literal["http", "sse"]


@contextlib.asynccontextmanager
async def serving(transport: Transport = "http", seen: Seen | None = None) -> AsyncIterator[str]:
    """The kit on a free port; its endpoint URL (`.../mcp` or `.../sse`)."""
    server = kit(seen)
    app = server.streamable_http_app() if transport == "http" else server.sse_app()
    async with serve_asgi(app) as url:
        yield f"{url}/mcp" if transport == "http" else f"{url}/sse"


@contextlib.asynccontextmanager
async def serving_odd(seen: Seen | None = None) -> AsyncIterator[str]:
    """The odd server (odd_app) on a free port; its endpoint URL."""
    async with serve_asgi(odd_app(seen)) as url:
        yield f"{url}/mcp"


@contextlib.contextmanager
def in_thread(serve: Callable[[], contextlib.AbstractAsyncContextManager[str]]) -> Iterator[str]:
    """A server of `serve` (serving, serving_odd) in a thread with a loop of its own, for a test that is
    sync or whose loop must stay free; its endpoint URL."""
    urls: queue.Queue[str] = queue.Queue()
    done = threading.Event()

    async def main() -> None:
        async with serve() as url:
            urls.put(url)
            await asyncio.to_thread(done.wait)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    try:
        yield urls.get(timeout=20)
    finally:
        done.set()
        thread.join(timeout=20)


def main(argv: list[str]) -> None:
    """`python -m tests.mcp_servers [stdio]`, or `http PORT` (Streamable HTTP on 127.0.0.1:PORT, /mcp)."""
    if argv in ([], ["stdio"]):
        kit().run("stdio")
    elif len(argv) == 2 and argv[0] == "http":
        uvicorn.run(kit().streamable_http_app(), host="127.0.0.1", port=int(argv[1]), log_level="warning")
    else:
        raise SystemExit("usage: python -m tests.mcp_servers [stdio | http PORT]")


@dataclass
class TaskScript:
    """What the task server does: `slow` answers with a task that completes after `polls` tasks/get (never,
    when None); the task ids it was asked to cancel land in `cancelled`. `asks` (a form), `visit` (a page)
    and `flood` (`questions` forms at once) answer with an InputRequiredResult until they are retried with
    answers, which land in `retries` (the inputResponses and requestState each retry carried)."""

    polls: int | None = 2
    interval_ms: int = 250
    gets: int = 0
    cancelled: list[str] = field(default_factory=list)
    questions: int = 5
    retries: list[tuple[dict[str, Any], str | None]] = field(default_factory=list)


_TASK_TIMES = {"createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttlMs": None}


def _asked(questions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    requests = {key: {"method": "elicitation/create", "params": params} for key, params in questions.items()}
    return {"resultType": "input_required", "inputRequests": requests, "requestState": "round-1"}


def _asking(script: TaskScript, params: mt.CallToolRequestParams) -> dict[str, Any]:
    """The task server's tools that ask: until retried with answers, an InputRequiredResult."""
    if params.input_responses:
        answers = {key: value.model_dump(exclude_none=True) for key, value in params.input_responses.items()}
        script.retries.append((answers, params.request_state))
        return {"resultType": "complete", "content": [{"type": "text", "text": f"answered {answers}"}]}
    if params.name == "asks":
        schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
        return _asked({"colour": {"mode": "form", "message": "Which colour?", "requestedSchema": schema}})
    if params.name == "visit":
        page = {"mode": "url", "message": "Sign in", "url": "https://example.com/sign-in", "elicitationId": "e1"}
        return _asked({"sign-in": page})
    form = {"mode": "form", "message": "Again?", "requestedSchema": {"type": "object", "properties": {}}}
    return _asked({f"q{number}": form for number in range(script.questions)})


def tasks_app(script: TaskScript) -> Starlette:
    """A 2026-07-28 server of the Tasks extension (io.modelcontextprotocol/tasks) whose tool `slow` answers a
    caller that declared the extension with a task, and whose `asks`, `visit` and `flood` answer with an
    InputRequiredResult (`_asking`). Streamable HTTP at /mcp."""

    class _Params(mt.RequestParams):
        taskId: str

    async def listing(ctx: Any, params: Any) -> mt.ListToolsResult:
        names = ("slow", "asks", "visit", "flood")
        tools = [mt.Tool(name=name, input_schema={"type": "object"}) for name in names]
        return mt.ListToolsResult(tools=tools)

    async def call(ctx: Any, params: mt.CallToolRequestParams) -> dict[str, Any]:
        if params.name in ("asks", "visit", "flood"):
            return _asking(script, params)
        task = {"taskId": "task-1", "status": "working", "pollIntervalMs": script.interval_ms, **_TASK_TIMES}
        return {"resultType": "task", **task}

    async def get(ctx: Any, params: _Params) -> dict[str, Any]:
        script.gets += 1
        body = {"resultType": "complete", "taskId": params.taskId, **_TASK_TIMES}
        if script.polls is None or script.gets < script.polls:
            return {**body, "status": "working", "pollIntervalMs": script.interval_ms}
        result = {"content": [{"type": "text", "text": f"done after {script.gets} polls"}]}
        return {**body, "status": "completed", "result": result}

    async def cancel(ctx: Any, params: _Params) -> dict[str, Any]:
        script.cancelled.append(params.taskId)
        return {"resultType": "complete"}

    server = Server("tasks", on_list_tools=listing, on_call_tool=call)  # type: ignore[arg-type]
    server.extensions["io.modelcontextprotocol/tasks"] = {}
    server.add_request_handler("tasks/get", _Params, get)
    server.add_request_handler("tasks/cancel", _Params, cancel)
    manager = StreamableHTTPSessionManager(server)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)


if __name__ == "__main__":
    main(sys.argv[1:])
