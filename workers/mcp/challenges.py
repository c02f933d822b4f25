"""What each of a worker's MCP connections was last challenged with: a grant's server answering 401 (its
token refused, or none sent) or 403 (`insufficient_scope`: a step-up) with `WWW-Authenticate: Bearer ...`.
The transport notes it (workers/mcp/wire.py) under the hub's key of the connection, which digests its
credentials, so what a server said of one person's token is found by the next step that would send that
same token (workers/mcp/grant_tokens.py), and nobody else's. Held in memory, bounded; a header past
`MAX_HEADER_CHARS` is not noted (no server needs one that long to say where its metadata is)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

MAX_HEADER_CHARS = 2048
# Connections whose challenge is held at most (the oldest go first): the hub holds 64 connections.
MAX_HELD = 1024


@dataclass(frozen=True, slots=True)
class Challenged:
    """A server's answer to a request: its status (401 or 403), its `WWW-Authenticate` and that header's
    `error` (None when it names none)."""

    status: int
    header: str
    error: str | None

    @property
    def step_up(self) -> bool:
        return self.status == 403 and self.error == "insufficient_scope"


class Challenges:
    """The latest challenge of each connection, by the hub's key."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, Challenged] = OrderedDict()

    def note(self, key: str, status: int, header: str, error: str | None) -> None:
        if len(header) > MAX_HEADER_CHARS:
            return
        self._held.pop(key, None)
        self._held[key] = Challenged(status, header, error)
        while len(self._held) > MAX_HELD:
            self._held.popitem(last=False)

    def peek(self, key: str) -> Challenged | None:
        """The connection's challenge, left for the next look (one sent without a token says where the
        server's metadata is to every session that has none)."""
        return self._held.get(key)

    def take(self, key: str) -> Challenged | None:
        """The connection's challenge, once."""
        return self._held.pop(key, None)
