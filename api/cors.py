"""Browsers: who may call from another origin.

A session's routes answer a cross-origin request only from an origin in its agent's `allowed_origins`
(`PUT /v1/agents/{id}/security`; empty by default): the preflight gets the CORS headers, the request gets
`Access-Control-Allow-Origin` naming that origin (never `*`; credentials travel in `Authorization`, not
cookies). Any other cross-origin request is refused with 403 before it acts, preflight or not: a browser
would hide the answer anyway, but a simple POST would already have done its work. `/sdk/` files are
public and load from anywhere. Requests without `Origin`, or from the API's own origin (the console, the
demo), are not affected; the API's own origin is its scheme, host and port together.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.asgi import header, send_refusal
from api.state import AppState
from common.codec import canonical_uuid

# `traceparent`: the browser SDK sends a traced call's span with its ack, progress and result.
ALLOW_HEADERS = ", ".join(
    (
        "Authorization",
        "Content-Type",
        "Idempotency-Key",
        "Last-Event-ID",
        "Kikuvi-Workspace",
        "Switchboard-Pool-Member",
        "traceparent",
    )
)
# The headers an MCP caller sends at 2026-07-28 (and before it, its protocol version), allowed on the
# session MCP endpoints; a tool's own `Mcp-Param-<name>` headers are allowed as the preflight names them.
MCP_ALLOW_HEADERS = "Mcp-Method, Mcp-Name, MCP-Protocol-Version, Mcp-Session-Id, Last-Event-ID"
_MCP_PATH = re.compile(r"/v1/sessions/[^/]+/mcp(?:/[^/]+)?")
_PARAM_HEADER = re.compile(r"mcp-param-[a-z0-9_.-]{1,64}")
# How many of a preflight's Mcp-Param headers are allowed back: a tool has few parameters, and the answer
# stays small whatever the preflight asks.
_MAX_PARAM_HEADERS = 32
ALLOW_METHODS = "GET, POST, PUT, DELETE"
EXPOSE_HEADERS = "Switchboard-Pool-Member, Retry-After"
PUBLIC_PREFIX = "/sdk/"
_SESSION = re.compile(r"/v1/sessions/([^/]+)(?:/.*)?")
# A change to an agent's allowed origins reaches every API process within this long.
_CACHE_S = 2.0
_CACHE_SIZE = 10_000
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_of(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme)


def _same_origin(scope: Scope, origin: str) -> bool:
    """Whether `origin` is the API's own: the same scheme, host and port. The scheme is the request's as
    uvicorn saw it, or as a trusted proxy forwarded it (`api.proxies`): an `http://` page of the API's
    host is another origin than the API behind TLS, and must not pass as it."""
    host = header(scope, b"host")
    if host is None:
        return False
    try:
        theirs = _origin_of(origin)
        ours = _origin_of(f"{scope.get('scheme', 'http')}://{host}")
    except ValueError:
        return False
    return theirs[1] is not None and theirs == ours


class CrossOrigin:
    def __init__(self) -> None:
        self._cache: OrderedDict[str, tuple[float, frozenset[str]]] = OrderedDict()

    async def _allowed(self, state: AppState, session_id: str) -> frozenset[str]:
        now = time.monotonic()
        cached = self._cache.get(session_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        origins = await state.broker.agents.session_origins(session_id)
        self._cache[session_id] = (now + _CACHE_S, origins)
        self._cache.move_to_end(session_id)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return origins

    async def __call__(self, state: AppState, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """Serve `scope` through `app` under the rules above."""
        origin = header(scope, b"origin")
        if origin is None or _same_origin(scope, origin):
            await app(scope, receive, send)
            return
        path: str = scope["path"]
        preflight = scope["method"] == "OPTIONS" and header(scope, b"access-control-request-method") is not None
        if path.startswith(PUBLIC_PREFIX):
            await _pass(scope, receive, send, app, "*", preflight)
            return
        match = _SESSION.fullmatch(path)
        session_id = canonical_uuid(match.group(1)) if match else None
        if session_id is None or origin not in await self._allowed(state, session_id):
            if session_id:
                why = "it is not among the allowed origins of this session's agent"
            else:
                why = "only a session's routes answer other origins, those its agent allows"
            message = f"origin {origin} may not call this route: {why}"
            await send_refusal(send, 403, "forbidden", message, {"Vary": "Origin"})
            return
        await _pass(scope, receive, send, app, origin, preflight)


async def _pass(scope: Scope, receive: Receive, send: Send, app: ASGIApp, allow: str, preflight: bool) -> None:
    cors = [(b"access-control-allow-origin", allow.encode()), (b"vary", b"Origin")]
    if preflight:
        cors += [
            (b"access-control-allow-methods", ALLOW_METHODS.encode()),
            (b"access-control-allow-headers", _allowed_headers(scope).encode()),
            (b"access-control-max-age", b"600"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": cors})
        await send({"type": "http.response.body", "body": b""})
        return
    cors.append((b"access-control-expose-headers", EXPOSE_HEADERS.encode()))

    async def with_cors(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *cors]}
        await send(message)

    await app(scope, receive, with_cors)


def _allowed_headers(scope: Scope) -> str:
    if not _MCP_PATH.fullmatch(scope["path"]):
        return ALLOW_HEADERS
    asked = (header(scope, b"access-control-request-headers") or "").lower().split(",")
    params = [name for name in (part.strip() for part in asked) if _PARAM_HEADER.fullmatch(name)]
    return ", ".join([ALLOW_HEADERS, MCP_ALLOW_HEADERS, *params[:_MAX_PARAM_HEADERS]])
