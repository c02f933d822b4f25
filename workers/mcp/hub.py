"""A worker's MCP servers: one connection per server (its URL and credentials), opened when a step first
needs it and kept while it is used; each server's tool list cached until it says the list changed or a
short time passes. A server that cannot be reached, times out or answers something that is not MCP gives
no tools for that step, is logged and counted, and the run goes on.

A server's tools are read by one listing at a time, with one deadline for connecting and every page
(`CONNECT_TIMEOUT_S`): a step that needs a list while none is kept waits for the one being read (every
such step shares it, its result and its deadline, never one after another); a step that finds its list
stale goes on with it while a listing reads it again beside the steps. So a slow server holds a step's
job slot for one listing's deadline at most, once, and only while the worker has no list of it at all.

A server's tools are offered only if their schemas may be stored as a registration's `parameters`
(common/schema/accept.py: an object schema, every reference resolved within itself, RE2 patterns, bounded
size); the others are left out, logged. Checking them takes at most `ACCEPT_BUDGET_S` of CPU a listing, a
tool at a time with the loop free in between, so no server's list holds up the other sessions' work."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from common.addresses import ProviderAddresses
from common.codec import dumps
from common.runtime import imported
from common.schema.accept import SchemaRefused, accept_parameters
from workers.config import McpGrant
from workers.mcp.budget import Budget
from workers.mcp.challenges import Challenges
from workers.mcp.listing import MAX_DESCRIPTION_CHARS, MAX_SCHEMA_CHARS
from workers.mcp.mapped import Interim, Mapped, Working, failed
from workers.metrics import WorkerMetrics

# The `mcp` package (two thirds of a worker's imports: a second or more of its start) is imported when the
# worker first connects to a grant's server, not when it starts: most workers never do, and a worker's start
# is on the path of every scale-up. So connection.py and results.py, which import it, are imported then, in
# a thread (`_client`); mapped.py holds what the rest needs of a result.
if TYPE_CHECKING:
    import mcp.types as mt

    from workers.mcp.connection import Connection, Progress
    from workers.mcp.live_asks import Asker

logger = logging.getLogger(__name__)

# How long a listing is used before it is read again (a server that sends list_changed is read at once).
LIST_TTL_S = 30.0
# How long a server that failed is left alone before a step tries it again.
RETRY_AFTER_S = 5.0
# How long connecting (both transports, when the first fails), negotiating and every page of a listing may
# take in all, per server, before the steps waiting for it go on without it.
CONNECT_TIMEOUT_S = 10.0
# Open connections per worker; the one unused longest is closed past this.
MAX_CONNECTIONS = 64
# CPU one listing's schema checks may take; the tools past it are left out (logged).
ACCEPT_BUDGET_S = 0.5
# The names MCP asks servers to use; a tool named otherwise is left out (its name goes to the model).
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@dataclass(frozen=True, slots=True)
class McpTool:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class _Server:
    connection: Connection | None = None
    tools: list[McpTool] | None = None
    listed_at: float = 0.0
    failed_at: float = 0.0
    failure: str = ""
    # Whether its latest listing failed for a 401: the server refused the grant's credentials.
    refused: bool = False
    # The one listing of this server in flight, if any.
    listing: asyncio.Task[list[McpTool] | None] | None = None
    # Held while a connection is opened, so a listing and calls open one.
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)


def offered(tool: mt.Tool, server: str) -> McpTool | None:
    """The tool as a model may be offered it, or None (logged) when its name or schema may not be used."""
    if not _TOOL_NAME.fullmatch(tool.name):
        logger.warning(
            "an MCP tool of %s is left out: its name %r is not 1 to 128 of A-Z a-z 0-9 _ . -", server, tool.name[:200]
        )
        return None
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    try:
        if len(dumps(schema)) > MAX_SCHEMA_CHARS:
            raise SchemaRefused("", f"the schema is larger than {MAX_SCHEMA_CHARS:,} characters")
        accept_parameters(schema)
    except (SchemaRefused, ValueError, TypeError) as refused:
        logger.warning("the MCP tool %s of %s is left out: its inputSchema is refused: %s", tool.name, server, refused)
        return None
    return McpTool(tool.name, (tool.description or "")[:MAX_DESCRIPTION_CHARS], schema)


async def accepted(listing: list[mt.Tool], server: str) -> list[McpTool]:
    """The tools of a listing a model may be offered, checked one at a time (the loop free in between)
    within `ACCEPT_BUDGET_S` of CPU; those past it are left out, logged."""
    kept: list[McpTool] = []
    spent = 0.0
    for number, tool in enumerate(listing):
        if spent > ACCEPT_BUDGET_S:
            logger.warning(
                "%d tools of %s are left out: checking the schemas of the first %d took %.2f s of CPU",
                len(listing) - number, server, number, spent,
            )  # fmt: skip
            break
        began = time.thread_time()
        if (found := offered(tool, server)) is not None:
            kept.append(found)
        spent += time.thread_time() - began
        # One schema at a time: the other sessions' work runs between two.
        await asyncio.sleep(0)
    return kept


async def _client() -> None:
    """Load the modules that speak MCP (once; the imports in the methods below then find them loaded)."""
    await imported("workers.mcp.connection")
    await imported("workers.mcp.results")


class McpHub:
    def __init__(self, addresses: ProviderAddresses, metrics: WorkerMetrics | None = None) -> None:
        self._addresses = addresses
        self._metrics = metrics
        # What every connection of the worker holds of its servers' answers while it reads them.
        self.budget = Budget()
        self._servers: OrderedDict[str, _Server] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()
        self._listings: set[asyncio.Task[list[McpTool] | None]] = set()
        # What each connection's server last challenged it with (read by workers/mcp/grant_tokens.py).
        self.challenges = Challenges()

    @staticmethod
    def key(grant: McpGrant) -> str:
        """What identifies the grant's server and connection (the bound on its concurrent calls is per key)."""
        # The credentials are part of what the connection is: two grants of one URL with different tokens
        # are two connections (and no token is kept as a key in the clear).
        digest = hashlib.sha256(dumps(sorted(grant.headers.items())).encode()).hexdigest()[:16]
        return f"{grant.url} {digest}"

    def _server(self, grant: McpGrant) -> _Server:
        key = self.key(grant)
        server = self._servers.get(key)
        if server is None:
            server = self._servers[key] = _Server()
            self._evict()
        self._servers.move_to_end(key)
        return server

    async def tools(self, grants: tuple[McpGrant, ...]) -> dict[str, list[McpTool]]:
        """Each reachable grant's tools by grant name, all grants read at once; the others are left out."""
        found = await asyncio.gather(*(self._tools(grant) for grant in grants))
        return {grant.name: tools for grant, tools in zip(grants, found, strict=True) if tools is not None}

    async def _tools(self, grant: McpGrant) -> list[McpTool] | None:
        server = self._server(grant)
        now = time.monotonic()
        alive = server.connection is not None and server.connection.alive
        if server.tools is not None and alive and now - server.listed_at < LIST_TTL_S:
            return server.tools
        listing = server.listing
        if listing is None:
            if server.failure and now - server.failed_at < RETRY_AFTER_S:
                return None
            listing = server.listing = asyncio.create_task(self._list(grant, server), name=f"mcp list {grant.url}")
            self._listings.add(listing)
            listing.add_done_callback(self._listings.discard)
        if server.tools is not None:
            # Stale (or its connection gone): the step goes on with it while it is read again.
            return server.tools
        # A step's own cancellation leaves the listing to the others waiting for it.
        await asyncio.wait([listing])
        return None if listing.cancelled() else listing.result()

    async def _list(self, grant: McpGrant, server: _Server) -> list[McpTool] | None:
        """One listing of the server, connecting first if need be, within `CONNECT_TIMEOUT_S` in all."""
        deadline = asyncio.get_running_loop().time() + CONNECT_TIMEOUT_S
        await _client()
        from workers.mcp.connection import describe

        try:
            try:
                async with asyncio.timeout_at(deadline):
                    connection = await self._connected(grant, server, deadline)
                    with connection.using():
                        listing = await connection.tools(deadline)
            except TimeoutError:
                self._failed(grant, server, f"no answer to connecting and listing within {CONNECT_TIMEOUT_S:g} s")
                return None
            except Exception as error:
                self._failed(grant, server, describe(error))
                return None
            server.tools = await accepted(listing, grant.url)
            server.listed_at, server.failure, server.refused = time.monotonic(), "", False
            return server.tools
        finally:
            server.listing = None

    def refused(self, grant: McpGrant) -> bool:
        """Whether the grant's server refused its credentials (a 401) when it was last listed, or to any
        request of its connection since: an OAuth grant's token it no longer takes, as when its resource
        moved to another authorization server."""
        server = self._servers.get(self.key(grant))
        if server is None:
            return False
        return server.refused or (server.connection is not None and server.connection.unauthorized)

    def _failed(self, grant: McpGrant, server: _Server, why: str) -> None:
        server.refused = server.connection is not None and server.connection.unauthorized
        if not server.failure:
            logger.warning("the MCP server of grant %s (%s) is left out: %s", grant.name, grant.url, why)
        server.failure, server.failed_at, server.tools = why, time.monotonic(), None
        if self._metrics is not None:
            self._metrics.mcp_failures.inc()

    async def _connected(self, grant: McpGrant, server: _Server, deadline: float) -> Connection:
        """The server's open connection, opened by `deadline` (loop time) if need be."""
        from workers.mcp.connection import Connection

        async with server.opening:
            if server.connection is not None and server.connection.alive:
                return server.connection
            if server.connection is not None:
                await server.connection.close()

            def changed() -> None:
                server.listed_at = 0.0

            key = self.key(grant)

            def challenged(status: int, header: str, error: str | None) -> None:
                self.challenges.note(key, status, header, error)

            server.connection = Connection(
                grant.url,
                grant.headers,
                self._addresses,
                self.budget,
                timeout_s=CONNECT_TIMEOUT_S,
                on_list_changed=changed,
                on_dropped=self._dropped,
                on_challenge=challenged,
            )
            await server.connection.open(deadline)
            return server.connection

    def _evict(self) -> None:
        # Every grant a step names is remembered (its listing, its failure), so the servers held are
        # bounded: the one used longest ago goes, its connection closed in the background.
        while len(self._servers) > MAX_CONNECTIONS:
            _, oldest = self._servers.popitem(last=False)
            if oldest.listing is not None:
                oldest.listing.cancel()
            if oldest.connection is not None:
                closing = asyncio.create_task(oldest.connection.close())
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)

    def _dropped(self) -> None:
        if self._metrics is not None:
            self._metrics.mcp_notifications_dropped.inc()

    async def call(
        self,
        grant: McpGrant,
        tool: str,
        arguments: dict[str, Any],
        progress: Progress,
        deadline: float | None = None,
        answers: tuple[dict[str, Any], str | None] | None = None,
        traceparent: str = "",
        asker: Asker | None = None,
    ) -> Mapped | Interim:
        """`tools/call` on the grant's server, the result mapped (an error result when the server cannot be
        reached, fails, or has not answered by `deadline`: loop time, by default the grant's `timeout_s`
        from now; connecting counts); a task or a request for input handed back as it came. `answers`:
        a retry's `inputResponses` and `requestState`. `asker`: who answers an older server's questions
        during the call, which then runs on a connection of its own (workers/mcp/live_asks.py)."""
        await _client()
        from workers.mcp.connection import describe, leaf
        from workers.mcp.results import map_result

        loop = asyncio.get_running_loop()
        deadline = loop.time() + grant.timeout_s if deadline is None else deadline
        late = f"the MCP tool {tool} of {grant.name} did not finish within {grant.timeout_s:g} s"
        connection = await self._reach(grant, deadline, late)
        if isinstance(connection, Mapped):
            return connection
        alone: Connection | None = None
        if asker is not None and connection.older:
            opened = await self._alone(grant, connection.sse, deadline, late, asker)
            if isinstance(opened, Mapped):
                return opened
            connection = alone = opened
        try:
            with connection.using():
                async with asyncio.timeout_at(deadline):
                    left = max(0.001, deadline - loop.time())
                    result = await connection.call(tool, arguments, left, progress, answers, traceparent)
        except TimeoutError:
            unanswered = asker is not None and asker.unanswered > 0
            return failed(f"{late}: its server's question was not answered in time" if unanswered else late)
        except Exception as error:
            # The result says what went wrong in words; the log keeps the exception itself.
            logger.info("the MCP tool %s of grant %s failed: %r", tool, grant.name, leaf(error))
            if not connection.alive and alone is None:
                self._failed(grant, self._server(grant), describe(error))
            return failed(f"the MCP tool {tool} of {grant.name} failed: {describe(error)}")
        finally:
            if alone is not None:
                await alone.close()
        return result if isinstance(result, Interim) else map_result(result)

    async def _alone(self, grant: McpGrant, sse: bool, deadline: float, late: str, asker: Asker) -> Connection | Mapped:
        from workers.mcp.live_asks import open_alone

        key = self.key(grant)

        def challenged(status: int, header: str, error: str | None) -> None:
            self.challenges.note(key, status, header, error)

        parts = (self._addresses, self.budget, self._dropped, challenged)
        return await open_alone(
            grant, parts, sse=sse, deadline=deadline, connect_s=CONNECT_TIMEOUT_S, late=late, asker=asker
        )

    async def _reach(self, grant: McpGrant, deadline: float, late: str = "") -> Connection | Mapped:
        """The grant's open connection, opened by `deadline` if need be; else the call's error result
        (`late` its text when the deadline came first)."""
        from workers.mcp.connection import describe

        loop = asyncio.get_running_loop()
        server = self._server(grant)
        try:
            async with asyncio.timeout_at(deadline):
                opened_by = min(deadline, loop.time() + CONNECT_TIMEOUT_S)
                return await self._connected(grant, server, opened_by)
        except TimeoutError:
            return failed(late or f"the MCP server of {grant.name} could not be reached in time")
        except Exception as error:
            self._failed(grant, server, describe(error))
            return failed(f"the MCP server of {grant.name} could not be reached: {describe(error)}")

    async def poll(self, grant: McpGrant, task: str, body: dict[str, Any] | None, deadline: float) -> Mapped | Working:
        """The task's state: `body`, the answer that created it, else one `tasks/get` by `deadline` (loop
        time); its outcome mapped as the call's result, or Working (ask again after its poll_s)."""
        await _client()
        from workers.mcp import tasks
        from workers.mcp.connection import describe
        from workers.mcp.results import map_result

        connection = await self._reach(grant, deadline)
        if isinstance(connection, Mapped):
            return connection

        async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await connection.request(method, params, deadline)

        try:
            with connection.using():
                read = await tasks.read(
                    send, task, body if body is not None else await send("tasks/get", {"taskId": task})
                )
        except TimeoutError:
            await self.cancel_task(grant, task)
            return map_result(tasks.too_late(grant.timeout_s))
        except Exception as error:
            logger.info("the MCP task %s of grant %s could not be read: %s", task, grant.name, describe(error))
            await self.cancel_task(grant, task)
            return failed(f"the MCP server's task of {grant.name} could not be read: {describe(error)}")
        return read if isinstance(read, Working) else map_result(read)

    async def cancel_task(self, grant: McpGrant, task: str) -> None:
        """`tasks/cancel` of the grant's server's task, within tasks.CANCEL_TIMEOUT_S; nothing if it fails."""
        await _client()
        from workers.mcp import tasks

        deadline = asyncio.get_running_loop().time() + tasks.CANCEL_TIMEOUT_S
        connection = await self._reach(grant, deadline)
        if isinstance(connection, Mapped):
            return

        async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await connection.request(method, params, deadline)

        with connection.using():
            await tasks.cancel(send, task)

    async def close(self) -> None:
        for listing in list(self._listings):
            listing.cancel()
        if self._listings:
            await asyncio.gather(*self._listings, return_exceptions=True)
        for server in self._servers.values():
            if server.connection is not None:
                await server.connection.close()
        self._servers.clear()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
