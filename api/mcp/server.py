"""The MCP server every session is, served statelessly by the `mcp` package's transport: its session
manager serves every revision the package speaks, the handshake revisions on its stateless Streamable
HTTP and 2026-07-28 (no handshake, Mcp-Method/Mcp-Name/Mcp-Param-* header validation, caching hints)
on its single-exchange entry, chosen by the request's MCP-Protocol-Version header."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

import mcp.types as mt
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from api.mcp.back_channel import routed
from api.mcp.context import CLIENT_KEY, SCOPE_KEY
from api.mcp.inputs import answer_reply, declared
from api.mcp.task_status import listen as task_status
from api.mcp.tasks import register as register_tasks
from api.mcp.tools import call_tool, list_tools
from api.state import AppState


class SessionMcp:
    """The MCP server every session is, and the transport that serves it statelessly."""

    def __init__(self, max_body_bytes: int) -> None:
        # A session's tools change as clients come and go, and differ by session: a tools/list is stale at
        # once and never shared across credentials.
        hints: dict[CacheableMethod, CacheHint] = {"tools/list": CacheHint(ttl_ms=0, scope="private")}
        server: Server[Any] = Server(
            "switchboard", version=version("switchboard"), cache_hints=hints, on_list_tools=list_tools
        )
        # Registered as a plain handler: a tools/call may answer with a task, a result shape of the tasks
        # extension (api/mcp/tasks.py) rather than the core CallToolResult.
        server.add_request_handler("tools/call", mt.CallToolRequestParams, call_tool)
        register_tasks(server)
        server.add_request_handler("subscriptions/listen", mt.SubscriptionsListenRequestParams, task_status)
        # The API's own CORS, the route's origin check (api/routes/mcp.py) and auth stand in front; the
        # transport checks no Host header (the API may be served under any name).
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self._max_body_bytes = max_body_bytes
        self._manager = StreamableHTTPSessionManager(
            server, stateless=True, security_settings=security, max_request_body_size=max_body_bytes
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self._manager.run():
            yield

    async def handle(
        self,
        state: AppState,
        session_id: str,
        credential: str,
        client_name: str | None,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """Serve one request (`client_name`: that client's tools under their own names; None: every
        client tool under its model-visible name), counted as one of the session's and the credential's
        event streams for as long as its answer is open (a call waits for its client's answer, or for an
        approval): past the caps TooManyRequests, before anything of it is read or written."""
        close = state.stream_caps.open(session_id, credential)
        try:
            scope[SCOPE_KEY] = (state, session_id, credential)
            if client_name is not None:
                scope[CLIENT_KEY] = client_name

            async def answer(request_id: str, reply: Any) -> None:
                await answer_reply(state, session_id, request_id, reply)

            prepared = await routed(scope, receive, send, self._max_body_bytes, answer, declared)
            if prepared is not None:
                await self._manager.handle_request(scope, *prepared)
        finally:
            close()
