"""An MCP server of the older protocol (the initialize handshake: it refuses `server/discover`), made with
the `mcp` package's low-level server, whose tools ask the client with `elicitation/create` on the session
while they hold the `tools/call` open (as servers of 2025-11-25 and before do)."""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types.jsonrpc import METHOD_NOT_FOUND
from starlette.applications import Starlette
from starlette.routing import Mount

from tests.stack import serve_asgi

NAME_FORM: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
EMPTY_FORM: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass
class OlderScript:
    """What the older server does: `flood` asks `questions` at once, `many` asks `rounds` one after another;
    each tool's result lists how each question was answered (`accept {...}`, `decline`, `cancel`, or
    `error <message>` when the client refused it); `others` makes a sampling and a roots request. The
    capabilities declared by the connection of each call land in `declared`."""

    questions: int = 5
    rounds: int = 9
    declared: list[dict[str, Any]] = field(default_factory=list)
    # As `declared`, for the connections that listed the tools (shared by every call of the grant).
    listed: list[dict[str, Any]] = field(default_factory=list)


class _Asking:
    """One call's questions, asked on the session while its `tools/call` is held open."""

    def __init__(self, ctx: Any) -> None:
        self._session = ctx.session
        self._request_id = ctx.request_id

    async def form(self, message: str, schema: dict[str, Any]) -> str:
        try:
            result = await self._session.elicit_form(message, schema, related_request_id=self._request_id)
        except MCPError as refused:
            return f"error {refused.error.message}"
        return f"{result.action} {result.content}" if result.action == "accept" else str(result.action)

    async def page(self) -> str:
        try:
            result = await self._session.elicit_url(
                "Sign in", "https://example.com/sign-in", "e1", related_request_id=self._request_id
            )
        except MCPError as refused:
            return f"error {refused.error.message}"
        return str(result.action)

    async def others(self) -> str:
        """A sampling and a roots request, which a grant's client does not declare."""
        said = []
        message = mt.SamplingMessage(role="user", content=mt.TextContent(type="text", text="Hi"))
        with warnings.catch_warnings():
            # Deprecated at 2026-07-28, and still what an older server may send.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            try:
                await self._session.create_message([message], max_tokens=5, related_request_id=self._request_id)
                said.append("sampled")
            except MCPError as refused:
                said.append(f"error {refused.error.message}")
            try:
                # On the call's stream, as the sampling request is (list_roots() would send it on the standing
                # GET stream, which a grant's connection reads only while the grant is in use).
                on_call = ServerMessageMetadata(related_request_id=self._request_id)
                await self._session.send_request(mt.ListRootsRequest(), mt.ListRootsResult, metadata=on_call)
                said.append("rooted")
            except MCPError as refused:
                said.append(f"error {refused.error.message}")
        return " | ".join(said)


async def _answer(script: OlderScript, asking: _Asking, tool: str) -> str:
    if tool == "asks":
        return await asking.form("Your name?", NAME_FORM)
    if tool == "visit":
        return await asking.page()
    if tool == "bad":
        return await asking.form("Draw this", {"type": "object", "properties": {"deep": {"type": "object"}}})
    if tool == "others":
        return await asking.others()
    if tool == "flood":
        asked = [asking.form(f"Question {number}?", EMPTY_FORM) for number in range(script.questions)]
        return " | ".join(await asyncio.gather(*asked))
    return " | ".join([await asking.form(f"Round {number}?", EMPTY_FORM) for number in range(script.rounds)])


def older_app(script: OlderScript) -> Starlette:
    """The server (see the module's docstring), Streamable HTTP at /mcp: `asks` (a name, by form), `visit`
    (a page), `flood`, `many`, `bad` (a form no host can draw) and `others`."""

    async def listing(ctx: Any, params: Any) -> mt.ListToolsResult:
        if ctx.session.client_params is not None:
            script.listed.append(ctx.session.client_params.capabilities.model_dump(by_alias=True, exclude_none=True))
        names = ("asks", "visit", "flood", "many", "bad", "others")
        return mt.ListToolsResult(tools=[mt.Tool(name=name, input_schema={"type": "object"}) for name in names])

    async def refuse_discover(ctx: Any, params: Any) -> mt.DiscoverResult:
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found")

    async def call(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        if ctx.session.client_params is not None:
            declared = ctx.session.client_params.capabilities.model_dump(by_alias=True, exclude_none=True)
            script.declared.append(declared)
        text = await _answer(script, _Asking(ctx), params.name)
        return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)])

    server = Server("older", on_list_tools=listing, on_call_tool=call)
    server.add_request_handler("server/discover", mt.RequestParams, refuse_discover)
    manager = StreamableHTTPSessionManager(server)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)


@contextlib.asynccontextmanager
async def serving_older(script: OlderScript) -> AsyncIterator[str]:
    """The older server on a free port of 127.0.0.1; its endpoint URL."""
    async with serve_asgi(older_app(script)) as url:
        yield f"{url}/mcp"
