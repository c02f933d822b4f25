"""/v1/sessions/{sid}/mcp: the session as an MCP server (Streamable HTTP, stateless; docs/mcp.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.types import Receive, Scope, Send

from api.deps import Authenticated, ManagedSession
from api.mcp_server import SessionMcp
from api.state import AppState, State

router = APIRouter(prefix="/v1/sessions/{session_id}/mcp", tags=["mcp"])


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
    mcp: SessionMcp = request.app.state.switchboard_mcp
    return _Handoff(mcp, state, canonical, caller.id)
