"""`switchboard tools mcp -- COMMAND [ARGS...]`: a local MCP server's tools served as a client registration.

The bridge starts the MCP server (a child over stdio, or one over HTTP with `--server-url`), registers its
tools (name, description, `inputSchema` as `parameters`, `annotations`), and serves their calls as a
member of the registration's pool (`switchboard.tool_member`): ack, `tools/call`, the result mapped as a
grant's is (`workers.mcp.results`); a call of a tool it did not declare is an error result, never sent
to the server. MCP progress becomes the call's progress; a call that fails while it runs is cancelled at
the server; a changed tool list replaces the registration's tools; a child that exits is started again.
Ctrl-C or SIGTERM leaves the registration.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp.types as mt
import pydantic
from mcp.shared.exceptions import MCPError

from api.schemas.clients import MAX_ANNOTATIONS, MAX_PROGRESS_CHARS, MAX_TOOLS, ClientToolBody
from common.schema.accept import SchemaRefused, accept_parameters
from switchboard.mcp_link import Link, LinkError, Progress, ServerGone, ServerSpec, StderrRelay
from switchboard.tool_log import ToolLogFormat
from switchboard.tool_member import Member, Target
from switchboard.tool_registration import (
    STOPPING,
    Registration,
    ServeError,
    api_client,
    leave,
    ping_until_lapsed,
    plural,
    register,
    replace_tools,
    say_names,
    say_stopped,
    say_stopping,
)
from switchboard.typed_tools import Call
from workers.mcp.mapped import Mapped, failed
from workers.mcp.results import map_result

logger = logging.getLogger("switchboard.tools")
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CONCURRENCY = 8
# Calls in hand on stop get this long to finish; the rest are cancelled at the server.
DRAIN_S = 10.0
# A server's progress goes on at most this often a call (a chatty server cannot flood the API).
PROGRESS_EVERY_S = 0.25
_DESCRIPTION_CHARS = 4096


@dataclass(frozen=True)
class McpOptions:
    url: str
    session_id: str
    token: str
    name: str
    ttl_s: int | None
    server: ServerSpec
    log_format: ToolLogFormat = "plain"


def _annotations(tool: mt.Tool) -> dict[str, bool | str] | None:
    if tool.annotations is None:
        return None
    hints = tool.annotations.model_dump(by_alias=True, exclude_none=True)
    # Only what a registration may carry: short names, flags and short text.
    kept = {
        key: value
        for key, value in hints.items()
        if len(key) <= 64 and (isinstance(value, bool) or (isinstance(value, str) and len(value) <= 500))
    }
    return dict(list(kept.items())[:MAX_ANNOTATIONS]) or None


def _declaration(tool: mt.Tool) -> dict[str, Any]:
    declared: dict[str, Any] = {
        "name": tool.name,
        "description": (tool.description or "")[:_DESCRIPTION_CHARS],
        "parameters": tool.input_schema,
    }
    hints = _annotations(tool)
    if hints:
        declared["annotations"] = hints
    return declared


def declarations(tools: list[mt.Tool], warned: set[str]) -> list[dict[str, Any]]:
    """The tools as a registration declares them; those it cannot carry are left out, each with a warning
    once (`warned` holds the names already warned of)."""
    kept: list[dict[str, Any]] = []
    past: list[str] = []
    names: set[str] = set()
    for tool in tools:
        why = None
        if not NAME.match(tool.name):
            why = "its name is not 1 to 64 letters, digits, '_' or '-'"
        elif tool.name in names:
            # A registration refuses two tools of one name: the server's first of them is the one served.
            why = "the server lists another tool of this name before it"
        else:
            declared = _declaration(tool)
            try:
                ClientToolBody.model_validate(declared)
                accept_parameters(declared["parameters"])
            except pydantic.ValidationError as error:
                why = f"a registration cannot carry it: {str(error.errors()[0]['msg']).removeprefix('Value error, ')}"
            except SchemaRefused as error:
                why = f"its inputSchema is refused: {error}"
        if why is None and len(kept) == MAX_TOOLS:
            past.append(tool.name)
            continue
        if why is not None:
            if tool.name not in warned:
                warned.add(tool.name)
                logger.warning("left out the tool %r: %s", tool.name[:100], why, extra={"event": "left_out"})
            continue
        kept.append(declared)
        names.add(tool.name)
    if past and not set(past) <= warned:
        warned.update(past)
        logger.warning(
            "left out %s past the %d a registration holds: %s",
            plural(len(past), "tool"),
            MAX_TOOLS,
            ", ".join(past),
            extra={"event": "left_out"},
        )
    return kept


def result_body(mapped: Mapped) -> dict[str, Any]:
    """A mapped result as the result route's body (`content` blocks, `structured` where the server gave it,
    and `is_error`)."""
    content: list[dict[str, Any]] = []
    for block in mapped.blocks:
        data = block["data"]
        if block["type"] == "resource":
            content.append({"type": "resource", "resource": data})
        else:
            # The route's blocks are flat: the event form's `data` fields beside the `type`.
            content.append({"type": block["type"], **data})
    body: dict[str, Any] = {"content": content, "is_error": mapped.is_error}
    return body if mapped.structured is None else body | {"structured": mapped.structured}


def _progress(call: Call) -> Progress:
    last = [0.0]

    async def report(progress: float, total: float | None, message: str | None) -> None:
        fraction = min(max(progress / total, 0.0), 1.0) if total else None
        now = time.monotonic()
        if now - last[0] < PROGRESS_EVERY_S and fraction != 1.0:
            return
        last[0] = now
        call.progress(message[:MAX_PROGRESS_CHARS] if message else None, fraction)

    return report


class Bridge:
    def __init__(self, options: McpOptions) -> None:
        self._options = options
        self._stopping = asyncio.Event()
        self._relay = StderrRelay() if options.server.local else None
        self._link = Link(options.server, self._tools_seen, self._relay.file if self._relay else None)
        self._tools: list[dict[str, Any]] = []
        self._warned: set[str] = set()
        self._http: httpx2.AsyncClient | None = None
        self._registration: Registration | None = None
        self._drained = 0

    def stop(self, why: str = "asked") -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        say_stopping(why, DRAIN_S)

    async def run(self) -> None:
        if self._relay is not None:
            await self._relay.start()
        left: bool | None = None
        try:
            if not await self._start():
                return
            async with api_client(self._options.url, self._options.token) as http:
                self._http = http
                left = await self._registered(http)
        finally:
            await self._link.close()
            if self._relay is not None:
                await self._relay.close()
        if self._registration is not None:
            say_stopped(self._registration.id, left, self._drained)

    async def _start(self) -> bool:
        """The server started and its tools read; False if stopped first."""
        starting = asyncio.create_task(self._link.start())
        stopping = asyncio.create_task(self._stopping.wait())
        await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not starting.done():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
            return False
        try:
            tools = starting.result()
        except LinkError as error:
            raise ServeError(str(error)) from None
        server = self._options.server
        how = (
            f"started the MCP server {server.named()} over stdio"
            if server.local
            else (f"connected to the MCP server at {server.named()} over HTTP")
        )
        logger.info(
            "%s (protocol %s): %s",
            how,
            self._link.protocol,
            plural(len(tools), "tool"),
            extra={"event": "server_started", "protocol": self._link.protocol, "tools": len(tools)},
        )
        self._tools = declarations(tools, self._warned)
        return True

    async def _registered(self, http: httpx2.AsyncClient) -> bool:
        """Register, serve until stopped, leave; whether it left."""
        options = self._options
        try:
            registration = await register(http, options.session_id, options.name, options.ttl_s, self._tools)
        except httpx2.TransportError as error:
            raise ServeError(f"cannot reach the API at {options.url}: {error or type(error).__name__}") from None
        self._registration = registration
        say_names(registration)
        logger.info(
            "serving %s at a time; Ctrl-C or SIGTERM stops",
            plural(CONCURRENCY, "call"),
            extra={"event": "serving", "concurrency": CONCURRENCY},
        )
        try:
            while not self._stopping.is_set() and await self._serve(http, registration):
                logger.warning("the registration lapsed; registering again")
                registration = await register(http, options.session_id, options.name, options.ttl_s, self._tools)
                self._registration = registration
                say_names(registration)
        finally:
            left = await leave(http, options.session_id, registration.id)
        return left

    async def _serve(self, http: httpx2.AsyncClient, registration: Registration) -> bool:
        """Serve the registration's calls until stopped (False) or until it is gone (True)."""
        options = self._options
        target = Target(options.url, options.session_id, options.token, registration.id)
        member = Member(target, self._run, CONCURRENCY)
        member_stop = asyncio.Event()
        tasks: list[asyncio.Task[Any]] = [asyncio.create_task(member.serve(member_stop, DRAIN_S))]
        tasks.append(asyncio.create_task(self._stopping.wait()))
        if options.ttl_s is not None:
            tasks.append(asyncio.create_task(ping_until_lapsed(http, target.path, options.ttl_s)))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            member_stop.set()
            for task in tasks[1:]:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._stopping.is_set():
            self._drained += member.drained
            return False
        tasks[0].result()  # a member that failed says so here
        # The member ends by itself only when the registration is gone; the ping, when it lapsed.
        return True

    async def _run(self, name: str, arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        # The registration's tools are the session token's to replace (PUT .../tools), so a call names
        # whatever the token put there: only a tool this bridge declared reaches the server, never one it
        # left out (a refused schema, a bad name, one past the 64) or one it never heard of.
        if name not in self._declared():
            mapped = failed(
                f"{name} is not a tool this bridge declared for the MCP server, so the call was not sent to it"
            )
            return result_body(mapped), True
        try:
            mapped = map_result(await self._link.call(name, arguments, _progress(call)))
        except ServerGone as gone:
            mapped = failed(str(gone))
        except MCPError as error:
            mapped = failed(f"the MCP server answered with an error: {error.message}")
        except pydantic.ValidationError as error:
            mapped = failed(f"the MCP server's answer is not a tool result: {error.errors()[0]['msg']}")
        except Exception as error:
            # The session reads the result: words, not the exception's class (the log has that).
            logger.info("the call to %s of the MCP server failed: %r", name, error)
            mapped = failed(f"the call to the MCP server failed: {str(error) or 'it failed without saying why'}")
        return result_body(mapped), mapped.is_error

    def _declared(self) -> set[str]:
        return {str(tool["name"]) for tool in self._tools}

    async def _tools_seen(self, tools: list[mt.Tool]) -> None:
        """The server's list read again: the registration's tools replaced if they changed."""
        new = declarations(tools, self._warned)
        if new == self._tools:
            return
        before = {tool["name"] for tool in self._tools}
        after = [str(tool["name"]) for tool in new]
        added = [name for name in after if name not in before]
        removed = sorted(before - set(after))
        self._tools = new
        registration = self._registration
        if self._http is None or registration is None:
            return
        path = Target(self._options.url, self._options.session_id, self._options.token, registration.id).path
        if not await replace_tools(self._http, path, new):
            return
        self._registration = Registration(registration.id, registration.name, after)
        changes = [f"added {', '.join(added)}" if added else "", f"removed {', '.join(removed)}" if removed else ""]
        logger.info(
            "the MCP server's tools changed (%s); the registration's tools are replaced",
            "; ".join(change for change in changes if change) or "descriptions or schemas",
            extra={"event": "tools_replaced", "added": added, "removed": removed},
        )
        say_names(self._registration, added)


async def bridge(options: McpOptions) -> None:
    """Run the bridge until Ctrl-C, SIGTERM or SIGHUP; ServeError if it cannot start."""
    # The mcp client's and its HTTP client's request lines would drown the line per call.
    for name in ("mcp", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    running = Bridge(options)
    loop = asyncio.get_running_loop()
    for sig in STOPPING:
        loop.add_signal_handler(sig, running.stop, sig.name)
    await running.run()
