"""The fast lane: ping, ack and result served before FastAPI's routing, dependencies and middleware.

These three carry nearly all of a busy deployment's requests, and FastAPI's machinery cost several times
the work the requests do (one Redis script each): matching a path against every route, solving the
dependency tree, building Request and Response objects. The lane matches one regex and calls the same
functions as the FastAPI routes (`api.hot`). Anything it is not sure of (a result body that does not
validate, a content type that is not JSON, an unusual path) falls through, body and all, to the FastAPI
route, so every refusal still has exactly the shape the rest of the API gives. The FastAPI routes stay
declared: they are the OpenAPI document and the fallback.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from api import hot
from api.asgi import replay_body, send_json
from api.errors import STATUS, UNEXPECTED, error_headers, not_json_type, refused
from api.hot import HotRequest
from api.schemas.clients import ClientCallResultBody
from api.state import AppState
from broker.errors import SwitchboardError
from common.codec import dumps

logger = logging.getLogger(__name__)

ASGI = Callable[[Scope, Receive, Send], Awaitable[None]]

PREFIX = "/v1/sessions/{session_id}/clients/{client_id}"
# Group 3 is `ping`, or groups 4 and 5 are the call id and `ack` / `result`. The call id is as wide as
# the route's `{call_id:path}`, less the empty one, which the FastAPI route is left to refuse.
HOT_PATH = re.compile(r"/v1/sessions/([^/]+)/clients/([^/]+)/(?:(ping)|calls/(.+)/(ack|result))")
# The route templates, as the request counter labels the FastAPI routes.
TEMPLATES = {
    "ping": f"{PREFIX}/ping",
    "ack": f"{PREFIX}/calls/{{call_id:path}}/ack",
    "result": f"{PREFIX}/calls/{{call_id:path}}/result",
}


async def serve(
    state: AppState, match: re.Match[str], scope: Scope, receive: Receive, send: Send, fallback: ASGI
) -> None:
    """Answer a POST whose path `HOT_PATH` matched, or hand it to `fallback` with its body."""
    body = await _body(receive)
    if body is None:
        return
    headers = _hot_headers(scope)
    session_id, client_id, ping, call_id, action = match.groups()
    request = HotRequest("POST", scope["path"], headers, body)
    result: ClientCallResultBody | None = None
    if action == "result":
        result = _result_body(headers, body)
        if result is None:
            await fallback(scope, replay_body(body, receive), send)
            return
    try:
        extra: dict[str, str] = {}
        if ping:
            status, content = 200, (await hot.ping(state, request, session_id, client_id)).encode()
        elif result is not None:
            await hot.answer(state, request, session_id, client_id, call_id, result)
            status, content = 204, b""
        else:
            status, content = 200, (await hot.ack(state, request, session_id, client_id, call_id)).encode()
    except SwitchboardError as error:
        status, extra, content = STATUS[error.code], error_headers(error), dumps(refused(error)).encode()
    except Exception:
        logger.exception("unexpected error")
        status, extra, content = 500, {}, dumps(UNEXPECTED).encode()
    state.metrics.request("POST", TEMPLATES["ping" if ping else action], status).inc()
    await send_json(send, status, extra, content)


def _hot_headers(scope: Scope) -> dict[str, str]:
    """The headers a hot route reads, the first of each name."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1")
        if name in hot.HOT_HEADERS and name not in headers:
            headers[name] = raw_value.decode("latin-1")
    return headers


def _result_body(headers: dict[str, str], body: bytes) -> ClientCallResultBody | None:
    # A body not sent as JSON goes the routed way, whose refusal names the header it needs.
    if not_json_type(headers.get("content-type")) is not None:
        return None
    try:
        return ClientCallResultBody.model_validate_json(body)
    except ValidationError:
        return None


async def _body(receive: Receive) -> bytes | None:
    """The whole request body; None when the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
