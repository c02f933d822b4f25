"""The MCP server `switchboard tools mcp` serves, through the official `mcp` client: a command run as a
child over stdio (started again with backoff when it exits), or a server over Streamable HTTP (HTTP+SSE
for a URL ending in `/sse`), connected again when its connection is lost.

The `mcp` client is entered and left in one task (its cancel scopes require it), so the link is a task
that holds the client open; calls from other tasks go through the client's session, which multiplexes
them, and a call's task cancelled sends the server `notifications/cancelled`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import httpx2
import mcp.types as mt
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types.jsonrpc import CONNECTION_CLOSED

from workers.mcp.connection import describe

logger = logging.getLogger("switchboard.tools")
FIRST_DELAY_S, MAX_DELAY_S, STEADY_S = 0.5, 10.0, 30.0
# The first start must answer within this, or the command gives up (later starts are retried).
START_TIMEOUT_S = 30.0
# How long a call waits for a server being started again before it is answered with an error.
WAIT_UP_S = 10.0
# A listing is read a page at a time, up to this many pages.
MAX_PAGES = 10

ToolsSeen = Callable[[list[mt.Tool]], Awaitable[None]]
Progress = ProgressFnT


class LinkError(Exception):
    """The server could not be started or reached the first time; the message says why."""


class ServerGone(Exception):
    """The server exited (or its connection was lost) while a call ran, or is not back yet."""


@dataclass(frozen=True)
class ServerSpec:
    """A command to run over stdio (`command`), or the URL of a server over HTTP with its headers."""

    command: tuple[str, ...] = ()
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] | None = None

    @property
    def local(self) -> bool:
        return self.url is None

    def named(self) -> str:
        return shlex.join(self.command) if self.url is None else self.url


@contextlib.asynccontextmanager
async def _watched(
    transport: contextlib.AbstractAsyncContextManager[Any], ended: asyncio.Event
) -> AsyncIterator[tuple[Any, Any]]:
    """`transport`'s streams, with `ended` set once its read stream ends (a child's stdout closed: it exited)."""
    async with transport as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            try:
                async with send:
                    async for item in read:
                        await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                ended.set()

        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            try:
                yield receive, write
            finally:
                group.cancel_scope.cancel()


async def _either(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


class Link:
    """The server, kept running (or connected) from `start()` to `close()`; `on_tools` gets its tool list
    each time it is read after the first (after a restart, or when the server says it changed)."""

    def __init__(self, spec: ServerSpec, on_tools: ToolsSeen, errlog: TextIO | None = None) -> None:
        self.spec = spec
        self.protocol = ""
        self._on_tools = on_tools
        self._errlog = errlog
        self._client: Client | None = None
        self._up = asyncio.Event()
        self._closing = asyncio.Event()
        self._changed = asyncio.Event()
        self._owner: asyncio.Task[None] | None = None

    async def start(self) -> list[mt.Tool]:
        """Start (or connect to) the server and read its tools; LinkError if that fails."""
        first: asyncio.Future[list[mt.Tool]] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(first), name=f"mcp {self.spec.named()}")
        try:
            return await asyncio.wait_for(asyncio.shield(first), START_TIMEOUT_S)
        except TimeoutError:
            await self.close()
            raise LinkError(f"{self._what()} did not answer within {START_TIMEOUT_S:g} s") from None
        except BaseException:
            await self.close()
            raise

    def _what(self) -> str:
        return f"the MCP server `{self.spec.named()}`" if self.spec.local else f"the MCP server at {self.spec.url}"

    async def _own(self, first: asyncio.Future[list[mt.Tool]]) -> None:
        delay = FIRST_DELAY_S
        verb = "cannot start" if self.spec.local else "cannot connect to"
        while not self._closing.is_set():
            began = time.monotonic()
            try:
                await self._connected(first)
                what = "the MCP server exited" if self.spec.local else "the connection to the MCP server was lost"
            except Exception as error:
                if not first.done():
                    first.set_exception(LinkError(f"{verb} {self._what()}: {describe(error)}"))
                    return
                what = f"{verb} {self._what()}: {describe(error)}"
            if self._closing.is_set():
                return
            if time.monotonic() - began >= STEADY_S:
                delay = FIRST_DELAY_S
            again = "starting it again" if self.spec.local else "connecting again"
            logger.warning("%s; %s in %g s", what, again, delay, extra={"event": "server_lost", "delay_s": delay})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), delay)
            delay = min(delay * 2, MAX_DELAY_S)

    def _transport(self, stack: AsyncExitStack, ended: asyncio.Event) -> Any:
        spec = self.spec
        if spec.url is None:
            command, *args = spec.command
            params = StdioServerParameters(command=command, args=args, env=spec.env)
            return _watched(stdio_client(params, **({} if self._errlog is None else {"errlog": self._errlog})), ended)
        if spec.url.rstrip("/").endswith("/sse"):
            return sse_client(spec.url, headers=spec.headers)
        http = httpx2.AsyncClient(headers=spec.headers, timeout=httpx2.Timeout(30.0, read=300.0))
        stack.push_async_callback(http.aclose)
        return streamable_http_client(spec.url, http_client=http)

    async def _connected(self, first: asyncio.Future[list[mt.Tool]]) -> None:
        """One life of the server: until it exits (or its connection is lost) or the link closes."""
        ended = asyncio.Event()
        async with AsyncExitStack() as stack:
            transport = self._transport(stack, ended)
            client = Client(transport, message_handler=self._on_message, cache=None)
            await stack.enter_async_context(client)
            self.protocol = client.protocol_version
            tools = await _list_tools(client)
            self._client = client
            try:
                if first.done():
                    logger.info("the MCP server is back (%d tools listed)", len(tools), extra={"event": "server_back"})
                    await self._on_tools(tools)
                else:
                    first.set_result(tools)
                self._up.set()
                async with anyio.create_task_group() as group:
                    group.start_soon(self._listen, client, ended)
                    group.start_soon(self._relist, client)
                    await _either(ended, self._closing)
                    group.cancel_scope.cancel()
            finally:
                self._up.clear()
                self._client = None

    async def _listen(self, client: Client, ended: asyncio.Event) -> None:
        # Servers of the 2026-07-28 protocol say the list changed on a `subscriptions/listen` stream; older
        # ones send `notifications/tools/list_changed` on the session (_on_message).
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    self._changed.set()
        except ListenNotSupportedError:
            return
        except SubscriptionLost as error:
            # Over HTTP nothing else says the server went away; over stdio the child's exit does.
            logger.debug("the list-change stream was lost: %s", describe(error))
            if not self.spec.local:
                ended.set()
        except Exception as error:
            logger.debug("no list-change stream: %s", describe(error))

    async def _relist(self, client: Client) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                tools = await _list_tools(client)
            except Exception as error:
                logger.warning("could not read the MCP server's tools again: %s", describe(error))
                continue
            await self._on_tools(tools)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self._changed.set()

    async def call(self, name: str, arguments: dict[str, Any], progress: Progress) -> mt.CallToolResult:
        """`tools/call`: ServerGone if the server exits while it runs (or is not back within WAIT_UP_S);
        MCPError for the server's error answer."""
        if not self._up.is_set() and not self._closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._up.wait(), WAIT_UP_S)
        client = self._client
        if client is None:
            if self._closing.is_set():
                raise ServerGone("the MCP server is stopping")
            if self.spec.local:
                raise ServerGone("the MCP server is not running; it is being started again")
            raise ServerGone("the MCP server cannot be reached; the bridge is connecting again")
        request = mt.CallToolRequest(params=mt.CallToolRequestParams(name=name, arguments=arguments))
        try:
            # The session's own request, not Client.call_tool: that holds structured results to the
            # server's output schema, and the bridge only relays them.
            return await client.session.send_request(request, mt.CallToolResult, progress_callback=progress)
        except MCPError as error:
            if error.code != CONNECTION_CLOSED:
                raise
            lost = "the MCP server exited" if self.spec.local else "the connection to the MCP server was lost"
            raise ServerGone(f"{lost} while the call ran") from None

    async def close(self) -> None:
        """Stop the child (its stdin closed, then SIGTERM, then SIGKILL) or close the connection."""
        self._closing.set()
        if self._owner is None:
            return
        with contextlib.suppress(TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(self._owner), 10)
        self._owner.cancel()
        await asyncio.gather(self._owner, return_exceptions=True)


async def _list_tools(client: Client) -> list[mt.Tool]:
    found: list[mt.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        found += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


class StderrRelay:
    """The child's stderr as lines of our own (`server: ...`), so they fit `--log-format json` too. `file`
    is what the child is given as its stderr."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.file: TextIO = os.fdopen(write, "w")
        self._read = os.fdopen(read, "rb", buffering=0)
        self._task: asyncio.Task[None] | None = None
        self._transport: asyncio.BaseTransport | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=64 * 1024)
        self._transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self._read)
        self._task = asyncio.create_task(self._relay(reader))

    async def _relay(self, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:
                if end.partial:
                    _say(end.partial)
                return
            except asyncio.LimitOverrunError as long:
                line = await reader.readexactly(long.consumed)
            _say(line)

    async def close(self) -> None:
        """Close our end; what the child wrote is said first (for a moment, if a grandchild holds it)."""
        self.file.close()
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), 1.0)
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._transport is not None:
            self._transport.close()
        else:
            self._read.close()


def _say(line: bytes) -> None:
    text = line.decode(errors="replace").rstrip()
    logger.info("server: %s", text, extra={"event": "server_output"})
