"""The HTTP client one connection to a grant's server sends through: pinned as a provider's is
(workers/pinned.py), and bounded by what each exchange is for (workers/mcp/flow.py):

- a page of the tool list is read up to `MAX_LISTING_BYTES`, a call's answer up to `MAX_ANSWER_BYTES`,
  each as it arrives (past it the exchange fails, never parsed);
- an exchange of a listing or a call has no read timeout of its own (a quiet server is not cut while its
  call has time left) and ends when its operation does: at its deadline, or as soon as its caller stops
  waiting, whatever keep-alives the server sends;
- every answer spends from the connection's buckets as it is read, and a standing stream is read (and
  opened) only while the grant is in use.

Everything here is the public API of httpx2 (a transport, a byte stream) and anyio (cancel scopes)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx2

from common.addresses import ProviderAddresses
from workers.bounded_stream import CountedStream, EventEnds
from workers.mcp import flow
from workers.mcp.flow import Flow, Operation
from workers.pinned import PinnedTransport

# Bytes of one page of a tool list: a list of 256 tools with full schemas is a fraction of this; a larger
# one is refused as it is read, before any of it is parsed.
MAX_LISTING_BYTES = 1024 * 1024
# Bytes of any other answer (a JSON body, or an event stream in all): a result holds at most 64 Ki
# characters of text and 5 MiB of images, so anything near this is not one to relay.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# An exchange whose operation ended is cut this long after its deadline at the latest (the caller's own
# timeout, which says why, comes first).
CUT_GRACE_S = 5.0


class AnswerRefused(httpx2.StreamError):
    """An answer past its bytes or its time: the `mcp` transport turns it into an error for that request
    alone (a `StreamError`), and the connection goes on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Bounded(CountedStream):
    """An answer's body read under its limit, its operation's deadline and its connection's pace."""

    def __init__(
        self,
        stream: httpx2.AsyncByteStream,
        *,
        limit: int,
        flow: Flow,
        operation: Operation | None,
        standing: bool,
        events: bool,
    ) -> None:
        super().__init__(stream, events=EventEnds(every=True) if events else None)
        self._limit = limit
        self._flow = flow
        self._operation = operation
        self._standing = standing

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = aiter(self._stream)
        owed_s = 0.0
        deadline = self._operation.deadline + CUT_GRACE_S if self._operation is not None else float("inf")
        while True:
            # What the last chunk cost is waited for before the next is read (not before that one is
            # handed on: what was read while the grant was in use is not left to arrive after it).
            if owed_s > 0:
                await anyio.sleep(owed_s)
            if self._standing:
                await self._flow.wait_in_use()
            with anyio.CancelScope(deadline=deadline) as scope:
                if self._operation is not None:
                    if self._operation.closed:
                        scope.cancel()
                    self._operation.scopes.add(scope)
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    return
                finally:
                    if self._operation is not None:
                        self._operation.scopes.discard(scope)
            if scope.cancelled_caught:
                raise AnswerRefused("the MCP server's answer was cut: its request ended")
            ends = self.count(chunk)
            if self.read > self._limit:
                raise AnswerRefused(f"the MCP server's answer passed {self._limit:,} bytes")
            owed_s = self._flow.spend(len(chunk), len(ends))
            yield chunk


def _no_answer(request: httpx2.Request, why: str) -> httpx2.Response:
    # What an exchange cut before the server's headers ends as: an error status the `mcp` transport
    # turns into an error for that one request (an exception here would end the whole connection).
    return httpx2.Response(504, headers={"content-type": "text/plain"}, content=why.encode(), request=request)


class McpTransport(httpx2.AsyncBaseTransport):
    """Sends one connection's requests (see the module's docstring)."""

    def __init__(self, url: str, addresses: ProviderAddresses, what: str, flow: Flow, connect_timeout_s: float) -> None:
        self._pinned = PinnedTransport(url, addresses, what)
        self._flow = flow
        self._connect_timeout_s = connect_timeout_s

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        operation = flow.current()
        standing = (operation is None and request.method == "GET") or (
            operation is not None and operation.kind == "standing"
        )
        if standing:
            await self._flow.standing_turn()
            operation = None
        short = self._connect_timeout_s
        # A listing's or a call's exchange ends with its operation, a standing stream with its connection:
        # no pause between two reads cuts either. The others (the handshake, notifications) are short.
        read = None if standing or operation is not None else short
        request.extensions["timeout"] = {"connect": short, "read": read, "write": short, "pool": short}
        limit = MAX_LISTING_BYTES if operation is not None and operation.kind == "list" else MAX_ANSWER_BYTES
        if operation is None:
            response = await self._pinned.handle_async_request(request)
        else:
            with anyio.CancelScope(deadline=operation.deadline + CUT_GRACE_S) as scope:
                operation.scopes.add(scope)
                try:
                    response = await self._pinned.handle_async_request(request)
                finally:
                    operation.scopes.discard(scope)
            if scope.cancelled_caught:
                return _no_answer(request, "the request ended before the MCP server answered")
        if isinstance(response.stream, httpx2.AsyncByteStream):
            events = response.headers.get("content-type", "").startswith("text/event-stream")
            response.stream = _Bounded(
                response.stream, limit=limit, flow=self._flow, operation=operation, standing=standing, events=events
            )
        return response

    async def aclose(self) -> None:
        await self._pinned.aclose()


def mcp_client(
    url: str, addresses: ProviderAddresses, what: str, headers: dict[str, str], flow: Flow, connect_timeout_s: float
) -> httpx2.AsyncClient:
    """The connection's HTTP client: pinned, no redirects followed, bounded as the module says."""
    transport = McpTransport(url, addresses, what, flow, connect_timeout_s)
    return httpx2.AsyncClient(
        transport=transport, follow_redirects=False, timeout=connect_timeout_s, trust_env=False, headers=headers
    )
