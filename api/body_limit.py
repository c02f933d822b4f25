"""Request bodies larger than `SWITCHBOARD_MAX_BODY_BYTES` are refused with 413 before anything reads them.

A declared Content-Length over the limit is refused at once; a chunked body is read up to the limit and
refused as soon as it passes it, so no route (nor the fast lane) ever holds more than the limit in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.asgi import header, replay_body, send_refusal

_BODILESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
# A client still sending when the answer comes often loses it (the connection closes under its upload), so
# a chunked body past the limit is read on and thrown away, up to this many times the limit, first.
_DRAIN_FACTOR = 4


@dataclass(frozen=True, slots=True)
class Limit:
    """A body limit and the setting that sets it (named in the refusal)."""

    bytes: int
    setting: str


async def _refuse(send: Send, status: int, limit: Limit, why: str) -> None:
    message = f"the request body {why}; the limit is {limit.bytes} bytes ({limit.setting})"
    # 413 closes the connection: what the client is still sending is not read.
    await send_refusal(send, status, "invalid_request", message, {"Connection": "close"} if status == 413 else None)


async def limited(limit: Limit, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
    """Serve `scope` through `app`, refusing a body over `limit` bytes with 413."""
    if scope["method"] in _BODILESS:
        await app(scope, receive, send)
        return
    length = header(scope, b"content-length")
    if length is None:
        await _chunked(limit, scope, receive, send, app)
    elif not length.isdigit():
        await _refuse(send, 400, limit, f"length {length!r} is not a number")
    elif int(length) > limit.bytes:
        await _refuse(send, 413, limit, f"is {length} bytes")
    else:
        await app(scope, receive, send)


async def _chunked(limit: Limit, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
    """No length declared: read the body here, within the limit, then hand it on."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return  # the client went away
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit.bytes:
            await _discard(receive, limit.bytes * _DRAIN_FACTOR, message)
            await _refuse(send, 413, limit, "is over the limit")
            return
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    await app(scope, replay_body(b"".join(chunks), receive), send)


async def _discard(receive: Receive, budget: int, last: Message) -> None:
    while last.get("more_body", False) and budget > 0:
        last = await receive()
        if last["type"] != "http.request":
            return
        budget -= len(last.get("body", b""))
