"""The API's request spans: one server span per HTTP request, a child of the caller's `traceparent`
(the client's own span, for a call's ack, progress and result), wrapped outside every other layer so the
fast lane's requests have theirs too. Only installed when the process traces."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.asgi import header
from common.tracing import SpanRef, Tracing

# Path segments after these are ids: the span's name and `http.route` name the template, not the id.
_COLLECTIONS = frozenset(
    {
        "sessions",
        "clients",
        "calls",
        "agents",
        "versions",
        "input-requests",
        "approvals",
        "schedules",
        "webhooks",
        "api-keys",
        "model-providers",
        "mcp-connections",
        "mcp",
    }
)


def route_of(path: str) -> str:
    """`path` with its ids as `{id}` (a call id may hold `/`: the rest of a call's path up to its verb)."""
    parts = path.split("/")
    out: list[str] = []
    index = 0
    while index < len(parts):
        part = parts[index]
        out.append(part)
        if part in _COLLECTIONS and index + 1 < len(parts) and parts[index + 1]:
            out.append("{id}")
            index += 1
        index += 1
    return "/".join(out)


class TracedRequests:
    """Pure ASGI: a server span around each HTTP request."""

    def __init__(self, app: ASGIApp, tracing: Tracing) -> None:
        self._app = app
        self._tracing = tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        method, route = scope["method"], route_of(scope["path"])
        parent = SpanRef.parse(header(scope, b"traceparent"))
        attributes = {"http.request.method": method, "http.route": route, "url.path": scope["path"]}
        with self._tracing.span(f"{method} {route}", parent, attributes, kind="server") as span:
            status = 500

            async def observe(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await self._app(scope, receive, observe)
            finally:
                span.set({"http.response.status_code": status})
                if status >= 500:
                    span.fail(str(status))
