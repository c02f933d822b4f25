"""A large write to a session that has no room for it, refused before anything reads it.

Validating a body of hundreds of kilobytes (a registration's tool list, a result's images) takes the
event loop milliseconds; a flood of them at `SWITCHBOARD_MAX_SESSION_BYTES` would take them for every
request the scripts then refuse. A write to a session's routes whose declared length is over
`LARGE_WRITE_BYTES` is first held against the session's room (one script, `check_room.lua`, after the
token and the session, so nobody learns more than the write's own script would tell): a session with
less room than half the body is answered the write's own 409 at once, the body read and thrown away.
Every such write stores at least half its body (the registration and its event hold the tools twice, an
input's text or a result's content is stored as sent), so nothing that would fit is refused; the write's
own script checks again, exactly.
"""

from __future__ import annotations

import re

from starlette.types import Receive, Scope, Send

from api.asgi import header, send_json
from api.auth import WORKSPACE_HEADER, hot_caller
from api.errors import STATUS, refused
from api.state import AppState
from broker.errors import SwitchboardError
from broker.services.clients import LARGE_WRITE_BYTES
from broker.services.credentials import Permission
from common.codec import dumps

_SESSION_ROUTE = re.compile(r"/v1/sessions/([^/]+)/.+")
_WRITES = frozenset({"POST", "PUT", "PATCH"})


async def refused_for_room(state: AppState, scope: Scope, receive: Receive, send: Send) -> bool:
    """Whether the request was answered here (a 409: its session has no room for it)."""
    if scope["method"] not in _WRITES or not state.broker.settings.max_session_bytes:
        return False
    match = _SESSION_ROUTE.fullmatch(scope["path"])
    declared = header(scope, b"content-length")
    if match is None or declared is None or not declared.isdigit() or int(declared) <= LARGE_WRITE_BYTES:
        return False
    if header(scope, b"idempotency-key") is not None:
        # A retry may be owed the first attempt's answer, which its route replays whatever the room now.
        return False
    headers = {name: header(scope, name.encode()) or "" for name in ("authorization", WORKSPACE_HEADER)}
    if not headers[WORKSPACE_HEADER]:
        del headers[WORKSPACE_HEADER]
    try:
        session_id, who = await hot_caller(state.broker, headers, match.group(1), Permission.SESSION_MANAGE)
        full = await state.broker.clients.room(session_id, int(declared) // 2, who.caller)
    except SwitchboardError:
        # Whatever is wrong with the credential or the session, the route says it in its own words.
        return False
    if full is None:
        return False
    while (await receive()).get("more_body", False):
        pass
    status = STATUS[full.code]
    state.metrics.requests.labels(scope["method"], "/v1/sessions/{session_id}/... (no room)", str(status)).inc()
    await send_json(send, status, {}, dumps(refused(full)).encode())
    return True
