"""What the route leaves in an MCP request's scope for the handlers."""

from __future__ import annotations

from typing import Any

from api.state import AppState
from broker.services.runs import OfferedClient, client_tools

# Where the route leaves what it checked for the handlers: (app state, session id, credential).
SCOPE_KEY = "switchboard.mcp"
# The client name of `/mcp/{client_name}` (absent on `/mcp`).
CLIENT_KEY = "switchboard.mcp.client"
# The session's offered tools, read once a request: at 2026-07-28 the package's header check lists the
# tools (our list_tools) before the call it checks looks the same tool up.
_TOOLS_KEY = "switchboard.mcp.tools"


def scoped(ctx: Any) -> tuple[AppState, str, str]:
    """The app state, session id and credential of the request `ctx` serves."""
    found: tuple[AppState, str, str] = ctx.request.scope[SCOPE_KEY]
    return found


def client_of(ctx: Any) -> str | None:
    """The client whose tools the request `ctx` serves under their own names, or None for `/mcp`."""
    found: str | None = ctx.request.scope.get(CLIENT_KEY)
    return found


async def session_tools(ctx: Any) -> dict[str, tuple[OfferedClient, dict[str, Any]]]:
    """The tools the session's active run offers, by the name a model calls each (read once a request)."""
    scope = ctx.request.scope
    found: dict[str, tuple[OfferedClient, dict[str, Any]]] | None = scope.get(_TOOLS_KEY)
    if found is None:
        state, session_id, _ = scoped(ctx)
        found = scope[_TOOLS_KEY] = client_tools(await state.broker.runs.offered(session_id))
    return found
