"""Which of our requests each HTTP exchange with a grant's server carries, so that the exchange ends with
the request (at its deadline, or as soon as its caller stops waiting) and is bounded by what it is for.

The `mcp` client's public API has no way to say, on an HTTP request its transport sends, which of the
client's requests it carries: the client sends each request from a task of its own. What is public is the
message: its JSON-RPC id, and its `_meta`, which the client carries from the caller's request to the
wire unchanged. So:

- a listing or a call of ours is an `Operation` (its kind and deadline), and its requests go with a mark
  in their `_meta` (`MARK`, a number of this connection's);
- the guard (workers/mcp/guard.py), the transport between the client and the wire, sees each message the
  client sends: it takes the mark off (the server never sees it) and notes the message's JSON-RPC id
  against the operation (`sent`);
- the HTTP layer (workers/mcp/wire.py) reads the id from the body of each POST and finds the operation
  (`of`); an exchange of no operation (the handshake, a notification) is a short one.

An operation forgets its ids when it ends, so what is kept is bounded by the requests in flight."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2

from common.codec import loads

MARK = "switchboard/operation"
# A `subscriptions/listen` request of the client's own: its answer is a standing stream.
_LISTEN = "subscriptions/listen"
# Standing requests whose answer never came; the oldest are forgotten past this.
_MAX_STANDING = 16

Kind = Literal["list", "call", "standing"]


@dataclass(eq=False, slots=True)
class Operation:
    """One request of ours (a listing's pages share one): its exchanges end when it closes or at `deadline`
    (loop time)."""

    kind: Kind
    deadline: float = float("inf")
    scopes: set[anyio.CancelScope] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)
    closed: bool = False

    def close(self) -> None:
        self.closed = True
        for scope in self.scopes:
            scope.cancel()
        self.scopes.clear()


class Exchanges:
    """One connection's operations, by their mark and by the ids of the requests they sent."""

    def __init__(self) -> None:
        self._marked: dict[str, Operation] = {}
        self._ids: dict[str, Operation] = {}
        self._numbers = itertools.count(1)
        # The client's standing requests share one operation that never ends (the connection's).
        self._standing = Operation("standing")

    @contextlib.contextmanager
    def operation(self, kind: Kind, deadline: float) -> Iterator[dict[str, Any]]:
        """An operation for the block: the `_meta` its requests are sent with. Closed (its exchanges
        ended) as the block ends."""
        made = Operation(kind, deadline)
        mark = str(next(self._numbers))
        self._marked[mark] = made
        try:
            yield {MARK: mark}
        finally:
            del self._marked[mark]
            for request_id in made.ids:
                if self._ids.get(request_id) is made:
                    del self._ids[request_id]
            made.close()

    def sent(self, request_id: str, method: str, meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Note a request the client sends; its `_meta` as the server is to see it (None: unchanged)."""
        if method == _LISTEN:
            if len(self._standing.ids) >= _MAX_STANDING:
                self.answered(next(iter(self._standing.ids)))
            self._bind(request_id, self._standing)
        if meta is None or MARK not in meta:
            return None
        made = self._marked.get(str(meta[MARK]))
        if made is not None and not made.closed:
            self._bind(request_id, made)
        return {key: value for key, value in meta.items() if key != MARK}

    def _bind(self, request_id: str, operation: Operation) -> None:
        operation.ids.add(request_id)
        self._ids[request_id] = operation

    def answered(self, request_id: str) -> None:
        """The answer to a request came: a standing one's id is forgotten (an operation's, at its end)."""
        if self._ids.get(request_id) is self._standing:
            del self._ids[request_id]
            self._standing.ids.discard(request_id)

    def of(self, request: httpx2.Request) -> Operation | None:
        """The open operation whose request `request` carries, if any."""
        if not self._ids or request.method != "POST":
            return None
        try:
            body = loads(request.content)
        except (ValueError, httpx2.RequestNotRead):
            return None
        if not isinstance(body, dict) or "method" not in body or "id" not in body:
            return None
        found = self._ids.get(str(body["id"]))
        return found if found is not None and not found.closed else None
