"""Raw ASGI helpers for the layers that answer before FastAPI does (fast lane, CORS, limits)."""

from __future__ import annotations

from starlette.types import Message, Receive, Scope, Send

from common.codec import dumps

_JSON = [(b"content-type", b"application/json")]


def header(scope: Scope, name: bytes) -> str | None:
    """A request header's value (`name` lower case), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def replay_body(body: bytes, receive: Receive) -> Receive:
    """`receive` for the fallback: the body already read, then whatever the connection says next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def send_json(send: Send, status: int, extra: dict[str, str], content: bytes) -> None:
    headers = [(name.lower().encode(), value.encode()) for name, value in extra.items()]
    if status != 204:
        headers += [*_JSON, (b"content-length", str(len(content)).encode())]
    else:
        content = b""
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


async def send_refusal(send: Send, status: int, code: str, message: str, extra: dict[str, str] | None = None) -> None:
    """An error in the envelope every route answers with."""
    await send_json(send, status, extra or {}, dumps({"error": {"code": code, "message": message}}).encode())
