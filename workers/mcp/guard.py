"""What one connection lets through to the `mcp` client, message by message, as a transport of its own
around the `mcp` package's (`mcp.client.Transport`: an async context manager of a read and a write
stream):

- a page of the tool list is cut to its bounds (workers/mcp/listing.py) before the client validates it;
- `notifications/tools/list_changed` marks the listing stale here, at no cost, and goes no further;
- each request the client sends is noted against the operation its `_meta` marks (workers/mcp/exchanges.py),
  and goes on without the mark;
- every other notification, and every request the server makes of the worker, passes at most
  `NOTIFICATIONS_PER_S` a second (a burst of `NOTIFICATION_BURST`): the rest are dropped and counted
  (`switchboard_mcp_notifications_dropped`), so a flood spawns nothing in the client;
- answers to our requests always pass."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any, Protocol

import anyio
import mcp.types as mt
from mcp.client import Transport
from mcp.shared.message import SessionMessage

from workers.mcp.exchanges import Exchanges
from workers.mcp.flow import Bucket
from workers.mcp.listing import bounded

NOTIFICATIONS_PER_S = 20.0
NOTIFICATION_BURST = 100.0
_LIST_CHANGED = "notifications/tools/list_changed"
# The answer to our own `subscriptions/listen`: the client waits for it.
_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
# Listings awaiting their answer; ids of abandoned ones are forgotten past this.
_MAX_LISTINGS = 64

Item = SessionMessage | Exception


class _Read(Protocol):
    async def receive(self) -> Item: ...
    async def aclose(self) -> None: ...


class _Write(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...
    async def aclose(self) -> None: ...


class Guard:
    """One connection's gate (see the module's docstring)."""

    def __init__(
        self, server: str, exchanges: Exchanges, on_list_changed: Callable[[], None], on_dropped: Callable[[], None]
    ) -> None:
        self._server = server
        self._exchanges = exchanges
        self._on_list_changed = on_list_changed
        self._on_dropped = on_dropped
        self._bucket = Bucket(NOTIFICATIONS_PER_S, NOTIFICATION_BURST)
        self._listings: set[str] = set()
        self.dropped = 0

    def sent(self, item: SessionMessage) -> SessionMessage:
        """The item as it goes to the server."""
        message = item.message
        if not isinstance(message, mt.JSONRPCRequest):
            return item
        # As text: a server may answer id 3 as "3", which the client takes for the same request.
        request_id = str(message.id)
        if message.method == "tools/list":
            if len(self._listings) >= _MAX_LISTINGS:
                self._listings.clear()
            self._listings.add(request_id)
        params = message.params or {}
        meta = self._exchanges.sent(request_id, message.method, params.get("_meta"))
        if meta is None:
            return item
        # `params` left out rather than sent empty, as the client itself does (JSON-RPC has no null params).
        rest = {key: value for key, value in params.items() if key != "_meta"} | ({"_meta": meta} if meta else {})
        unmarked = (
            mt.JSONRPCRequest(jsonrpc="2.0", id=message.id, method=message.method, params=rest)
            if rest
            else mt.JSONRPCRequest(jsonrpc="2.0", id=message.id, method=message.method)
        )
        return SessionMessage(unmarked, item.metadata)

    def admit(self, item: Item) -> Item | None:
        """The item as the client may see it, or None when it goes no further."""
        if isinstance(item, Exception):
            return item
        message = item.message
        if isinstance(message, mt.JSONRPCResponse | mt.JSONRPCError):
            self._exchanges.answered(str(message.id))
        if isinstance(message, mt.JSONRPCResponse):
            if str(message.id) not in self._listings:
                return item
            self._listings.discard(str(message.id))
            page = mt.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=bounded(message.result, self._server))
            return SessionMessage(page, item.metadata)
        if isinstance(message, mt.JSONRPCError):
            self._listings.discard(str(message.id))
            return item
        if isinstance(message, mt.JSONRPCNotification) and message.method == _LIST_CHANGED:
            self._on_list_changed()
            return None
        if isinstance(message, mt.JSONRPCNotification) and message.method == _ACKNOWLEDGED:
            return item
        if self._bucket.take():
            return item
        self.dropped += 1
        self._on_dropped()
        return None


class _GuardedRead:
    def __init__(self, inner: _Read, guard: Guard) -> None:
        self._inner = inner
        self._guard = guard

    async def receive(self) -> Item:
        while True:
            admitted = self._guard.admit(await self._inner.receive())
            if admitted is not None:
                return admitted

    def __aiter__(self) -> _GuardedRead:
        return self

    async def __anext__(self) -> Item:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _GuardedRead:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()


class _GuardedWrite:
    def __init__(self, inner: _Write, guard: Guard) -> None:
        self._inner = inner
        self._guard = guard

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(self._guard.sent(item))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _GuardedWrite:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def guarded(transport: Transport, guard: Guard) -> AsyncIterator[Any]:
    """`transport` with `guard` between it and the client."""
    async with transport as (read, write):
        yield _GuardedRead(read, guard), _GuardedWrite(write, guard)
