"""The HTTP client one connection to a grant's server sends through: pinned as a provider's is
(workers/pinned.py), and bounded by what each exchange carries (workers/mcp/exchanges.py):

- a page of the tool list, an event of a standing stream and any answer but a call's are read up to
  `MAX_LISTING_BYTES`, a call's answer up to `MAX_ANSWER_BYTES`, each as it arrives (past it the exchange
  fails, never parsed); every message is held to a number of JSON values, and what every connection of
  the worker holds of its messages in flight to one budget (workers/mcp/budget.py);
- an exchange of a listing or a call has no read timeout of its own (a quiet server is not cut while its
  call has time left) and ends when its operation does: at its deadline, or as soon as its caller stops
  waiting, whatever keep-alives the server sends; what it waits for its pace ends with it too;
- every answer spends from the connection's buckets as it is read, a chunk of many events handed on at
  most a burst of them at a time, and a standing stream is read (and opened) only while the grant is in
  use;
- a 401 or 403 with a Bearer challenge is noted for the grant's next sign-in (workers/mcp/challenges.py)
  and answers its request with an error that says what the server wants (the `mcp` client would say
  only "Server returned an error response").

This builds on the public API of httpx2 (a transport, a byte stream), anyio (cancel scopes) and the
messages the `mcp` client sends (their ids)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import anyio
import httpx2
from mcp.client.auth.utils import extract_field_from_www_auth, extract_scope_from_www_auth

from common.addresses import ProviderAddresses
from workers.mcp.budget import Budget, Reading, Refused
from workers.mcp.exchanges import Exchanges, Operation
from workers.mcp.flow import EVENT_BURST, Flow
from workers.pinned import pinned_client

# Bytes of one page of a tool list: a list of 256 tools with full schemas is a fraction of this; a larger
# one is refused as it is read, before any of it is parsed. The same holds one event of a standing stream
# (the `mcp` client's own reader holds every event to it too), and any answer but a call's.
MAX_LISTING_BYTES = 1024 * 1024
# Bytes of a call's answer (a JSON body, or an event stream in all): a result holds at most 64 Ki
# characters of text and 5 MiB of images, so anything near this is not one to relay.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# An exchange whose operation ended is cut this long after its deadline at the latest (the caller's own
# timeout, which says why, comes first).
CUT_GRACE_S = 5.0
_EVENTS_A_PART = int(EVENT_BURST)


class AnswerRefused(httpx2.StreamError):
    """An answer past its bytes or its time: the `mcp` transport turns it into an error for that request
    alone (a `StreamError`), and the connection goes on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _parts(chunk: bytes, ends: list[int]) -> list[tuple[bytes, int]]:
    """`chunk` in parts of at most a burst of the events it ends, with the events each ends."""
    if len(ends) <= _EVENTS_A_PART:
        return [(chunk, len(ends))]
    cuts = ends[_EVENTS_A_PART - 1 :: _EVENTS_A_PART]
    parts = [(chunk[start:end], _EVENTS_A_PART) for start, end in zip([0, *cuts], cuts, strict=False)]
    if cuts[-1] < len(chunk):
        parts.append((chunk[cuts[-1] :], len(ends) % _EVENTS_A_PART))
    return parts


class _Bounded(httpx2.AsyncByteStream):
    """An answer's body read under its limit, its operation's deadline and its connection's pace."""

    def __init__(
        self,
        stream: httpx2.AsyncByteStream,
        *,
        limit: int,
        flow: Flow,
        operation: Operation | None,
        standing: bool,
        reading: Reading,
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._flow = flow
        self._operation = operation
        self._standing = standing
        self._reading = reading
        self._deadline = operation.deadline + CUT_GRACE_S if operation is not None else float("inf")

    async def _within(self, owed_s: float, chunks: AsyncIterator[bytes] | None) -> bytes | None:
        """Wait what the last part cost, then (given `chunks`) read the next chunk (None: the answer
        ended), both within the request's time: its deadline, or its closing, ends either wait."""
        with anyio.CancelScope(deadline=self._deadline) as scope:
            if self._operation is not None:
                if self._operation.closed:
                    scope.cancel()
                self._operation.scopes.add(scope)
            try:
                if owed_s > 0:
                    await anyio.sleep(owed_s)
                if chunks is None:
                    return b""
                if self._standing:
                    await self._flow.wait_in_use()
                return await anext(chunks, None)
            finally:
                if self._operation is not None:
                    self._operation.scopes.discard(scope)
        raise AnswerRefused("the MCP server's answer was cut: its request ended")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = aiter(self._stream)
        read, owed_s = 0, 0.0
        try:
            while True:
                # What the last part cost is waited for before the next is read (not before that one is
                # handed on: what was read while the grant was in use is not left to arrive after it).
                chunk = await self._within(owed_s, chunks)
                if chunk is None:
                    return
                try:
                    ends = self._reading.feed(chunk)
                except Refused as refused:
                    raise AnswerRefused(refused.message) from None
                # A standing stream is bounded event by event (it lasts as long as its connection).
                read += 0 if self._standing else len(chunk)
                if read > self._limit:
                    raise AnswerRefused(f"the MCP server's answer passed {self._limit:,} bytes")
                for number, (part, events) in enumerate(_parts(chunk, ends)):
                    if number:
                        await self._within(owed_s, None)
                    owed_s = self._flow.spend(len(part), events)
                    yield part
        finally:
            self._reading.close()

    async def aclose(self) -> None:
        self._reading.close()
        await self._stream.aclose()


def _no_answer(request: httpx2.Request, why: str) -> httpx2.Response:
    # What an exchange cut before the server's headers ends as: an error status the `mcp` transport
    # turns into an error for that one request (an exception here would end the whole connection).
    return httpx2.Response(504, headers={"content-type": "text/plain"}, content=why.encode(), request=request)


# What of a challenge's scope the error the model reads repeats.
_SHOWN_SCOPE = 200
# A JSON-RPC implementation-defined server error: the server refused the request's authorization.
_REFUSED_CODE = -32001

OnChallenge = Callable[[int, str, str | None], None]


def _refused(request: httpx2.Request, response: httpx2.Response, error: str | None) -> httpx2.Response | None:
    """A JSON-RPC error answering `request` (None when it is no request, or carries no id), saying why
    the server refused it, in words for the model."""
    try:
        message = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    scope = (extract_scope_from_www_auth(response) or "")[:_SHOWN_SCOPE]
    if response.status_code == 403 and error == "insufficient_scope":
        text = "the MCP server needs more permission for this (insufficient_scope"
        text += f', scope "{scope}")' if scope else ")"
        text += ": the person has to sign in to it again, granting that"
    else:
        text = f"the MCP server refused the grant's authorization ({response.status_code}"
        text += f": {error[:_SHOWN_SCOPE]})" if error else ")"
    body = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": _REFUSED_CODE, "message": text}}
    return httpx2.Response(
        response.status_code,
        headers={"content-type": "application/json"},
        content=json.dumps(body).encode(),
        request=request,
    )


class McpTransport(httpx2.AsyncBaseTransport):
    """Sends one connection's requests through `inner` (see the module's docstring)."""

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        flow: Flow,
        exchanges: Exchanges,
        budget: Budget,
        connect_timeout_s: float,
        on_unauthorized: Callable[[], None] = lambda: None,
        on_challenge: OnChallenge | None = None,
    ) -> None:
        self._inner = inner
        self._flow = flow
        self._exchanges = exchanges
        self._budget = budget
        self._connect_timeout_s = connect_timeout_s
        self._on_unauthorized = on_unauthorized
        self._on_challenge = on_challenge

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        operation = self._exchanges.of(request)
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
        limit = MAX_ANSWER_BYTES if operation is not None and operation.kind == "call" else MAX_LISTING_BYTES
        if operation is None:
            response = await self._inner.handle_async_request(request)
        else:
            with anyio.CancelScope(deadline=operation.deadline + CUT_GRACE_S) as scope:
                operation.scopes.add(scope)
                try:
                    response = await self._inner.handle_async_request(request)
                finally:
                    operation.scopes.discard(scope)
            if scope.cancelled_caught:
                return _no_answer(request, "the request ended before the MCP server answered")
        if response.status_code == 401:
            # The `mcp` transport makes any error status one error of its request; whether the server
            # refused the connection's credentials is said here, where the status is still known.
            self._on_unauthorized()
        if response.status_code in (401, 403) and (challenged := await self._challenged(request, response)):
            return challenged
        if isinstance(response.stream, httpx2.AsyncByteStream):
            events = response.headers.get("content-type", "").startswith("text/event-stream")
            reading = Reading(self._budget, message_limit=limit, events=events)
            response.stream = _Bounded(
                response.stream, limit=limit, flow=self._flow, operation=operation, standing=standing, reading=reading
            )
        return response

    async def _challenged(self, request: httpx2.Request, response: httpx2.Response) -> httpx2.Response | None:
        """A refusal with a Bearer challenge: noted, and its request answered with an error saying why."""
        header = response.headers.get("www-authenticate", "")
        if header[:6].lower() != "bearer":
            return None
        error = extract_field_from_www_auth(response, "error")
        if self._on_challenge is not None:
            self._on_challenge(response.status_code, header, error)
        refused = _refused(request, response, error)
        if refused is not None:
            await response.aclose()
        return refused

    async def aclose(self) -> None:
        await self._inner.aclose()


def mcp_client(
    url: str,
    addresses: ProviderAddresses,
    what: str,
    headers: dict[str, str],
    connection: tuple[Flow, Exchanges, Budget],
    connect_timeout_s: float,
    on_unauthorized: Callable[[], None] = lambda: None,
    on_challenge: OnChallenge | None = None,
) -> httpx2.AsyncClient:
    """The connection's HTTP client: the pinned client (workers/pinned.py) with its transport bounded as
    the module says; `connection`: the connection's pace and exchanges, and the worker's budget;
    `on_unauthorized`: told of each 401 the server answers; `on_challenge`: of each Bearer challenge
    (status, header, its `error`)."""
    flow, exchanges, budget = connection
    return pinned_client(
        url,
        addresses,
        connect_timeout_s,
        what,
        headers,
        around=lambda pinned: McpTransport(
            pinned, flow, exchanges, budget, connect_timeout_s, on_unauthorized, on_challenge
        ),
    )
