"""One live session with one MCP server, through the official `mcp` client: Streamable HTTP, or the older
HTTP+SSE transport for a server that only speaks it (a URL ending in `/sse`, or one whose Streamable HTTP
answer is an error). Every request goes through the pinned HTTP client (workers/pinned.py): only to the
grant's origin, to an address checked for that connection, its credentials with it.

The `mcp` client is entered and left in one task (its cancel scopes require it), so a connection is a
task that holds the client open until it is closed; calls from other tasks go through the client's
session, which multiplexes them.

What the server sends is bounded on its way in: by the HTTP client (workers/mcp/wire.py: bytes, JSON
values, the worker's budget, pace, the end of each request, standing streams read only while the grant is
in use) and by a transport of ours around the `mcp` package's (workers/mcp/guard.py: which request each
exchange carries, list pages cut before they are validated, notifications at a bounded rate).

A listing has one deadline, its connecting (both transports, if the first fails) and every page within
it; a call has its own."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol, cast

import anyio
import httpx2
import mcp.types as mt
import pydantic
from mcp import Client
from mcp.client.extension import advertise
from mcp.client.session import ElicitationFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types.jsonrpc import CONNECTION_CLOSED
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from broker.errors import AddressRefused
from common.addresses import ProviderAddresses
from common.tasks import cancel_and_wait
from workers.mcp import tasks
from workers.mcp.budget import Budget
from workers.mcp.exchanges import Exchanges
from workers.mcp.flow import Flow
from workers.mcp.guard import Guard, guarded
from workers.mcp.listing import MAX_TOOLS
from workers.mcp.mapped import Interim
from workers.mcp.wire import OnChallenge, mcp_client

logger = logging.getLogger(__name__)

WHAT = "the MCP server"
# A server's listing is read a page at a time (each page bounded as it is read); past these it is cut.
MAX_PAGES = 10


class _Answer(pydantic.BaseModel):
    # A tools/call answer read as its wire fields: a tool's result, or a task (tasks.is_task) to follow.
    model_config = pydantic.ConfigDict(extra="allow")

    def body(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class _TaskRequest(mt.Request[dict[str, Any], str]):
    # The extension's methods (tasks/get, tasks/cancel), which the package's client has no models for.
    method: str
    params: dict[str, Any]


class Progress(Protocol):
    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


class McpUnavailable(Exception):
    """The server could not be reached, timed out, or answered something that is not MCP."""


def leaf(error: BaseException) -> BaseException:
    """The first error inside the task groups the `mcp` client wraps what happened in."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def describe(error: BaseException) -> str:
    """What went wrong, in words for a log line or an error result (at most 300 characters): never an
    exception's class, which says nothing to the session that reads it."""
    inner = leaf(error)
    if isinstance(inner, AddressRefused):
        return inner.message
    if isinstance(inner, MCPError) and inner.code == CONNECTION_CLOSED:
        return "the connection closed"
    if isinstance(inner, pydantic.ValidationError):
        # The `mcp` client's models refused what the server sent; their names are the package's.
        return "the server answered something that is not MCP"
    text = str(inner)
    if text:
        return text[:300]
    if isinstance(inner, httpx2.TimeoutException | TimeoutError):
        return "no answer in time"
    if isinstance(inner, httpx2.TransportError | OSError | anyio.ClosedResourceError | anyio.EndOfStream):
        return "the connection failed"
    return "it failed without saying why"


def _meta(marked: dict[str, Any]) -> mt.RequestParamsMeta:
    # The `_meta` of a request is an open mapping; the client carries it to the wire as it is given.
    return cast(mt.RequestParamsMeta, marked)


def _unreachable(error: BaseException) -> bool:
    # No answer at all: trying the other transport would only wait again.
    inner = leaf(error)
    return isinstance(inner, httpx2.ConnectError | httpx2.TimeoutException | TimeoutError | AddressRefused)


class Connection:
    """A session with the server at `url`, open until `close()` or until it fails (`alive` goes false)."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        addresses: ProviderAddresses,
        budget: Budget,
        *,
        timeout_s: float,
        on_list_changed: Callable[[], None],
        on_dropped: Callable[[], None] = lambda: None,
        on_challenge: OnChallenge | None = None,
        elicit: ElicitationFnT | None = None,
    ) -> None:
        """`elicit`: the one call's answerer of an older server's `elicitation/create` (a connection of that
        call alone, which speaks only the older protocol and declares elicitation)."""
        self.url = url
        self._headers = headers
        self._addresses = addresses
        self._budget = budget
        # The read timeout of short exchanges (the handshake, notifications).
        self._timeout_s = timeout_s
        self._on_challenge = on_challenge
        self._elicit = elicit
        # Whether the session runs over the older HTTP+SSE transport.
        self.sse = False
        self.flow = Flow()
        self.exchanges = Exchanges()
        self.guard = Guard(url, self.exchanges, on_list_changed, on_dropped)
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._owner: asyncio.Task[None] | None = None
        # Whether the server answered any request of this connection with a 401: it refused the
        # credentials the grant's headers carry (an OAuth grant's token, workers/mcp/grant_tokens.py).
        self.unauthorized = False

    @property
    def alive(self) -> bool:
        return self._client is not None and self._owner is not None and not self._owner.done()

    @property
    def older(self) -> bool:
        """Whether the server negotiated a protocol of the initialize handshake (2025-11-25 and before),
        whose requests of the client come on the session rather than as an InputRequiredResult."""
        client = self._client
        return client is not None and client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS

    async def open(self, deadline: float, *, sse: bool = False) -> None:
        """Connect and negotiate by `deadline` (loop time), trying HTTP+SSE after Streamable HTTP within the
        same time (`sse`: HTTP+SSE alone); McpUnavailable saying why when that fails."""
        sse_only = sse or self.url.rstrip("/").endswith("/sse")
        # In use while it opens: an HTTP+SSE session's stream is a standing one, read only then.
        with self.flow.using():
            try:
                await self._open(deadline, sse=sse_only)
            except McpUnavailable:
                if sse_only or self._error is None or _unreachable(self._error):
                    raise
                first = self._error
                try:
                    await self._open(deadline, sse=True)
                except McpUnavailable:
                    raise McpUnavailable(describe(first)) from None

    async def _open(self, deadline: float, *, sse: bool) -> None:
        self._ready, self._stop, self._error, self._client = asyncio.Event(), asyncio.Event(), None, None
        self.sse = sse
        self._owner = asyncio.create_task(self._own(sse), name=f"mcp {self.url}")
        try:
            async with asyncio.timeout_at(deadline):
                await self._ready.wait()
        except TimeoutError:
            await cancel_and_wait([self._owner])
            self._error = TimeoutError("no answer in time")
        if self._client is None:
            raise McpUnavailable(describe(self._error or RuntimeError("the connection closed")))

    def _http(self) -> httpx2.AsyncClient:
        parts = (self.flow, self.exchanges, self._budget)
        return mcp_client(
            self.url, self._addresses, WHAT, self._headers, parts, self._timeout_s, self._refused, self._on_challenge
        )

    def _refused(self) -> None:
        self.unauthorized = True

    async def _own(self, sse: bool) -> None:
        try:
            # The HTTP client is ours to close (a Streamable HTTP transport given one leaves it open), also
            # when connecting is cut off.
            async with self._http() as http:
                if sse:

                    def factory(
                        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: Any = None
                    ) -> httpx2.AsyncClient:
                        return self._http()

                    transport: Any = sse_client(self.url, httpx_client_factory=factory)
                else:
                    transport = streamable_http_client(self.url, http_client=http)
                # Tasks are declared so a server may answer a long call with one, which `call` follows.
                extensions = [advertise(tasks.EXTENSION)]
                # Elicitation is declared only to an older server, on a connection of one call: the
                # 2026-07-28 protocol asks with an InputRequiredResult, which the call's turns answer.
                async with Client(
                    guarded(transport, self.guard),
                    cache=None,
                    extensions=extensions,
                    mode="auto" if self._elicit is None else "legacy",
                    elicitation_callback=self._elicit,
                ) as client:
                    self._client = client
                    self._ready.set()
                    async with anyio.create_task_group() as group:
                        group.start_soon(self._listen, client)
                        await self._stop.wait()
                        group.cancel_scope.cancel()
        except Exception as error:
            self._error = error
            if self._client is not None:
                logger.info("the MCP session with %s ended: %s", self.url, describe(error))
        finally:
            self._client = None
            self._ready.set()

    async def _listen(self, client: Client) -> None:
        # Servers of the 2026-07-28 protocol say a list changed on a `subscriptions/listen` stream; older
        # ones send `notifications/tools/list_changed` on the session. Either way the guard sees it and
        # the listing is read again at the next step; a server that says nothing is read again after a TTL.
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    pass
        except Exception as error:
            logger.debug("no list-change stream from %s: %s", self.url, describe(error))

    def _live(self) -> Client:
        if self._client is None:
            raise McpUnavailable(describe(self._error or RuntimeError("the connection closed")))
        return self._client

    def using(self) -> contextlib.AbstractContextManager[None]:
        """The grant is in use (its standing streams read) while the block runs."""
        return self.flow.using()

    async def tools(self, deadline: float) -> list[mt.Tool]:
        """The server's tools, every page read by `deadline` (loop time); TimeoutError past it."""
        client, found, cursor = self._live(), [], None
        with self.exchanges.operation("list", deadline) as meta:
            async with asyncio.timeout_at(deadline):
                for _ in range(MAX_PAGES):
                    page = await client.list_tools(cursor=cursor, meta=_meta(meta), cache_mode="refresh")
                    found += page.tools
                    cursor = page.next_cursor
                    if cursor is None or len(found) >= MAX_TOOLS:
                        break
        return found[:MAX_TOOLS]

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout_s: float,
        progress: Progress,
        answers: tuple[dict[str, Any], str | None] | None = None,
        traceparent: str = "",
    ) -> mt.CallToolResult | Interim:
        """`tools/call` within `timeout_s`, whatever the server sends meanwhile; cancelling the awaiting task
        (or the timeout) ends the request at the server (`notifications/cancelled`, or its stream closed).
        `answers`: the `inputResponses` and `requestState` of a retry after the server asked for input.
        A task or an InputRequiredResult is handed back as it came (Interim), for the caller to park."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        # The session's own request, not Client.call_tool: that checks structured results against the
        # server's output schema with jsonschema, unbudgeted, on this loop; the result is only relayed.
        # The client's own read timeout is a backstop a second later: the caller's timeout, which says why,
        # comes first.
        with self.exchanges.operation("call", deadline) as meta:
            # The call's span, as the MCP semantic conventions carry trace context: in the request's `_meta`.
            sent = {**meta, "traceparent": traceparent} if traceparent else meta
            params = mt.CallToolRequestParams(name=name, arguments=arguments, meta=_meta(sent))
            if answers is not None:
                # A grant answers elicitations alone (workers/mcp/asking.py).
                responses = {key: mt.ElicitResult.model_validate(value) for key, value in answers[0].items()}
                params = params.model_copy(update={"input_responses": responses, "request_state": answers[1]})
            answer = await self._live().session.send_request(
                mt.CallToolRequest(params=params),
                _Answer,
                request_read_timeout_seconds=timeout_s + 1,
                progress_callback=progress,
            )
            body = answer.body()
            if body.get("resultType") == "input_required" or tasks.is_task(body):
                return Interim(body)
            return mt.CallToolResult.model_validate(body, by_name=False)

    async def request(self, method: str, params: dict[str, Any], deadline: float) -> dict[str, Any]:
        """One of the Tasks extension's requests (`tasks/get`, `tasks/result`, `tasks/cancel`) by `deadline`
        (loop time): its result's body."""
        left = max(0.001, deadline - asyncio.get_running_loop().time())
        with self.exchanges.operation("call", deadline) as meta:
            request = _TaskRequest(method=method, params={**params, "_meta": meta})
            async with asyncio.timeout_at(deadline):
                reply = await self._live().session.send_request(request, _Answer, request_read_timeout_seconds=left + 1)
        return reply.body()

    async def close(self) -> None:
        self.flow.close()
        self._stop.set()
        owner = self._owner
        if owner is None or owner.done():
            return
        # The owner leaves the client's context itself (its cancel scopes are its own), given the time to.
        done, _ = await asyncio.wait([owner], timeout=5)
        if not done:
            await cancel_and_wait([owner])
