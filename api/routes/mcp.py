"""/v1/sessions/{sid}/mcp: the session as an MCP server (Streamable HTTP, stateless; docs/mcp.md)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request, Response
from starlette.types import Receive, Scope, Send

from api.deps import Authenticated, ManagedSession
from api.state import AppState, State
from common.runtime import imported

if TYPE_CHECKING:
    from api.mcp.server import SessionMcp

router = APIRouter(prefix="/v1/sessions/{session_id}/mcp", tags=["mcp"])


class SessionMcpLoader:
    """The session MCP server (api/mcp/), loaded and started by the first request to a session's
    /mcp: the `mcp` package is a quarter of the API's imports, and many APIs never serve it. It is imported
    in a thread, so the loop serves the other requests meanwhile; the server runs in a task of its own until
    `close` (its transport's task group is entered and left in one task, as anyio asks)."""

    def __init__(self, max_body_bytes: int) -> None:
        self._max_body_bytes = max_body_bytes
        self._ready: asyncio.Future[SessionMcp] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def server(self) -> SessionMcp:
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._serve(self._ready), name="session mcp")
        # Shielded: a request that goes away while the server starts does not stop it for the others.
        return await asyncio.shield(self._ready)

    async def _serve(self, ready: asyncio.Future[SessionMcp]) -> None:
        try:
            await imported("api.mcp.server")
            from api.mcp.server import SessionMcp

            server = SessionMcp(self._max_body_bytes)
            async with server.running():
                ready.set_result(server)
                await self._stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error)
            raise

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


class _Handoff(Response):
    """The response an MCP request gets is the `mcp` transport's to write: the route has checked the
    caller and the session, and hands the request on as it came (its body still unread)."""

    def __init__(self, mcp: SessionMcp, state: AppState, session_id: str, credential: str) -> None:
        super().__init__()
        self._args = (mcp, state, session_id, credential)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        mcp, state, session_id, credential = self._args
        await mcp.handle(state, session_id, credential, scope, receive, send)


# Not in the OpenAPI document: the MCP transport answers its own way (JSON-RPC bodies, event streams).
# POST only: the transport is stateless, so a GET (a stream for messages the server starts, which a
# stateless server never sends) and a DELETE (ending a session there is none of) are 405 from the router,
# before the caller is read, holding nothing.
@router.api_route("", methods=["POST"], include_in_schema=False)
async def session_mcp(canonical: ManagedSession, request: Request, caller: Authenticated, state: State) -> Response:
    """A session token, or an API key with session.manage: tools/list and tools/call on the session's
    active client tools."""
    loader: SessionMcpLoader = request.app.state.switchboard_mcp
    return _Handoff(await loader.server(), state, canonical, caller.id)
