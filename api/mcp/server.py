"""The MCP server every session is, served statelessly by the `mcp` package's transport."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from api.mcp.context import SCOPE_KEY
from api.mcp.task_status import listen as task_status
from api.mcp.tasks import register as register_tasks
from api.mcp.tools import call_tool, list_tools
from api.state import AppState


class SessionMcp:
    """The MCP server every session is, and the transport that serves it statelessly."""

    def __init__(self, max_body_bytes: int) -> None:
        server: Server[Any] = Server("switchboard", on_list_tools=list_tools)
        # Registered as a plain handler: a tools/call may answer with a task, a result shape of the tasks
        # extension (api/mcp/tasks.py) rather than the core CallToolResult.
        server.add_request_handler("tools/call", mt.CallToolRequestParams, call_tool)
        register_tasks(server)
        server.add_request_handler("subscriptions/listen", mt.SubscriptionsListenRequestParams, task_status)
        # The API's own CORS, origin checks and auth stand in front; the transport checks no Host header.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self._manager = StreamableHTTPSessionManager(
            server, stateless=True, security_settings=security, max_request_body_size=max_body_bytes
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self._manager.run():
            yield

    async def handle(
        self, state: AppState, session_id: str, credential: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Serve one request, counted as one of the session's and the credential's event streams for as
        long as its answer is open (a call waits for its client's answer, or for an approval): past the
        caps TooManyRequests, before anything of it is read or written."""
        close = state.stream_caps.open(session_id, credential)
        try:
            scope[SCOPE_KEY] = (state, session_id, credential)
            await self._manager.handle_request(scope, receive, send)
        finally:
            close()
