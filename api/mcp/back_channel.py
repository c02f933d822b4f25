"""Requests sent in band to a caller of a handshake revision (before 2026-07-28) that declared it answers
them, on a transport that keeps nothing between requests.

The `mcp` package's stateless transport has no way back: a request it sent would wait for a reply that
arrives as another POST, to another transport object and perhaps another API process. So the way back is
ours, and holds in every process: the caller's `Mcp-Session-Id` (issued on `initialize` only to a caller
that declared elicitation, sampling or roots) carries what it declared; a `tools/call` of such a caller
has our requests written into its own event stream between the package's events, each with an id naming
the input request it asks; and the caller's reply, a POST like any other, is taken here before the
package sees it and answers that input request through Redis, as the session's answer route does."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from common.codec import dumps, loads

# What a handshake caller declared it answers, for the handlers (absent: nothing declared).
ASKS_KEY = "switchboard.mcp.asks"
# The tools/call's own event stream, when requests may be written into it.
CHANNEL_KEY = "switchboard.mcp.channel"
# The id our in-band request has: the input request it asks, so that any process takes the reply.
_ID_PREFIX = "switchboard-input:"
_REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# What a session id says the caller answers, one bit each; the random part makes it unique, as MCP asks.
_BITS = {"elicitation.form": 1, "elicitation.url": 2, "sampling": 4, "roots": 8}
_SESSION = re.compile(r"swb1-[A-Za-z0-9_-]{22}-([0-9a-f])")
_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"


def session_id(asks: frozenset[str]) -> str:
    """The `Mcp-Session-Id` given to a handshake caller that declared `asks`."""
    bits = sum(bit for name, bit in _BITS.items() if name in asks)
    return f"swb1-{secrets.token_urlsafe(16)}-{bits:x}"


def asks_of(header: str | None) -> frozenset[str]:
    """What a session id this server gave says the caller answers (nothing for any other)."""
    matched = _SESSION.fullmatch(header or "")
    if matched is None:
        return frozenset()
    bits = int(matched.group(1), 16)
    return frozenset(name for name, bit in _BITS.items() if bits & bit)


def request_id_of(reply: Any) -> str | None:
    """The input request a JSON-RPC reply (a response or an error, no method) answers, when it replies to
    one of our in-band requests."""
    if not isinstance(reply, dict) or "method" in reply or not ("result" in reply or "error" in reply):
        return None
    rpc_id = reply.get("id")
    if not isinstance(rpc_id, str) or not rpc_id.startswith(_ID_PREFIX):
        return None
    request_id = rpc_id.removeprefix(_ID_PREFIX)
    return request_id if _REQUEST_ID.fullmatch(request_id) else None


class BackChannel:
    """One tools/call's event stream, with requests of ours written between the package's events (each
    ASGI body message of its stream is one whole event, so a lock keeps ours from splitting one)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = asyncio.Lock()
        self._streaming = False
        self._ended = False

    async def send(self, message: Message) -> None:
        async with self._lock:
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers") or []).get(b"content-type", b"")
                self._streaming = content_type.startswith(b"text/event-stream")
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                self._ended = True
            await self._send(message)

    async def request(self, request_id: str, method: str, params: dict[str, Any]) -> bool:
        """Ask the caller `method` for input request `request_id`; False once the stream is over (or was
        never one)."""
        payload = dumps({"jsonrpc": "2.0", "id": _ID_PREFIX + request_id, "method": method, "params": params})
        async with self._lock:
            if not self._streaming or self._ended:
                return False
            body = f"event: message\r\ndata: {payload}\r\n\r\n".encode()
            await self._send({"type": "http.response.body", "body": body, "more_body": True})
            return True


async def _buffered(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """The request's body when whole within `limit` bytes (None past it), and a receive that gives what
    was read again before the rest."""
    read: list[Message] = []
    size = 0
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if size > limit or not message.get("more_body", False):
            break
    last = read[-1]
    whole = size <= limit and last["type"] == "http.request" and not last.get("more_body", False)
    body = b"".join(message.get("body", b"") for message in read) if whole else None

    async def again() -> Message:
        return read.pop(0) if read else await receive()

    return body, again


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


Answer = Callable[[str, Any], Awaitable[None]]


async def routed(
    scope: Scope, receive: Receive, send: Send, limit: int, answer: Answer, declared: Callable[[Any], frozenset[str]]
) -> tuple[Receive, Send] | None:
    """Prepare a handshake revision's POST for the package: a reply to one of our requests is answered
    here (`answer(request_id, reply)`, then 202; None returned: nothing left to serve); an `initialize`
    whose capabilities (`declared(capabilities)`) say the caller answers requests is given a session id
    that says so; a caller's later requests carry what it declared, and its tools/call a back channel.
    A modern revision's request passes as it came."""
    version = _header(scope, _VERSION_HEADER)
    asks = asks_of(_header(scope, _SESSION_HEADER))
    # Read here only what may be ours: an `initialize` (a caller's first request, sent before it has a
    # revision to name) or anything from a caller holding our session id (its replies, its tools/calls).
    # The rest, every request of a caller that declared nothing, goes to the package unread.
    if scope["method"] != "POST" or (version is not None and (version not in HANDSHAKE_PROTOCOL_VERSIONS or not asks)):
        return receive, send
    body, receive = await _buffered(receive, limit)
    try:
        sent = loads(body) if body is not None else None
    except ValueError:
        sent = None
    if not isinstance(sent, dict):
        return receive, send
    request_id = request_id_of(sent)
    if request_id is not None:
        await answer(request_id, sent)
        await Response(status_code=202)(scope, receive, send)
        return None
    if sent.get("method") == "initialize":
        params = sent.get("params")
        asks = declared(params.get("capabilities") if isinstance(params, dict) else None)
        return receive, (_with_session(send, session_id(asks)) if asks else send)
    if not asks:
        return receive, send
    scope[ASKS_KEY] = asks
    if sent.get("method") == "tools/call":
        channel = BackChannel(send)
        scope[CHANNEL_KEY] = channel
        return receive, channel.send
    return receive, send


def _with_session(send: Send, session: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [*(message.get("headers") or []), (_SESSION_HEADER, session.encode())]
            message = {**message, "headers": headers}
        await send(message)

    return sending
