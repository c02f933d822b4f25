"""/v1/sessions/{sid}/mcp and /v1/sessions/{sid}/mcp/{client_name}: the session as an MCP server
(Streamable HTTP, stateless, every revision the `mcp` package speaks; docs/mcp.md)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request, Response
from starlette.types import Receive, Scope, Send

from api.asgi import header
from api.deps import Authenticated, ManagedSession
from api.mcp.names import ClientName
from api.state import AppState, State
from broker.errors import Forbidden
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

    def __init__(self, mcp: SessionMcp, state: AppState, session_id: str, credential: str, client: str | None) -> None:
        super().__init__()
        self._args = (mcp, state, session_id, credential, client)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        mcp, state, session_id, credential, client = self._args
        await mcp.handle(state, session_id, credential, client, scope, receive, send)


async def _origin_checked(request: Request, state: AppState, session_id: str) -> None:
    """A browser's request only from an origin the session's agent allows, even one that looks like the
    API's own: a page whose host name was rebound to this server (DNS rebinding) sends an Origin matching
    the Host it used, which the API-wide check takes for the console's. Decided before the body is read."""
    origin = header(request.scope, b"origin")
    if origin is not None and origin not in await state.broker.agents.session_origins(session_id):
        raise Forbidden(
            f"origin {origin} may not call this session's MCP server: "
            "it is not among the allowed origins of this session's agent"
        )


async def _handoff(request: Request, state: AppState, session_id: str, credential: str, client: str | None) -> Response:
    await _origin_checked(request, state, session_id)
    loader: SessionMcpLoader = request.app.state.switchboard_mcp
    return _Handoff(await loader.server(), state, session_id, credential, client)


# Not in the OpenAPI document: the MCP transport answers its own way (JSON-RPC bodies, event streams).
# POST only: the transport is stateless, so a GET (a stream for messages the server starts, which a
# stateless server never sends) and a DELETE (ending a session there is none of) are 405 from the router,
# before the caller is read, holding nothing.
@router.api_route("", methods=["POST"], include_in_schema=False)
async def session_mcp(canonical: ManagedSession, request: Request, caller: Authenticated, state: State) -> Response:
    """A session token, or an API key with session.manage: tools/list and tools/call on the session's
    active client tools, by the names a model sees."""
    return await _handoff(request, state, canonical, caller.id, None)


@router.api_route("/{client_name}", methods=["POST"], include_in_schema=False)
async def client_mcp(
    canonical: ManagedSession, client_name: ClientName, request: Request, caller: Authenticated, state: State
) -> Response:
    """As /mcp, for one client's tools under their own names: those of whichever registration holds
    `client_name` now (none listed while none does)."""
    return await _handoff(request, state, canonical, caller.id, client_name)
