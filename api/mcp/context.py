"""What the route leaves in an MCP request's scope for the handlers."""

from __future__ import annotations

from typing import Any

from api.state import AppState

# Where the route leaves what it checked for the handlers: (app state, session id, credential).
SCOPE_KEY = "switchboard.mcp"
# The client name of `/mcp/{client_name}` (absent on `/mcp`).
CLIENT_KEY = "switchboard.mcp.client"


def scoped(ctx: Any) -> tuple[AppState, str, str]:
    """The app state, session id and credential of the request `ctx` serves."""
    found: tuple[AppState, str, str] = ctx.request.scope[SCOPE_KEY]
    return found


def client_of(ctx: Any) -> str | None:
    """The client whose tools the request `ctx` serves under their own names, or None for `/mcp`."""
    found: str | None = ctx.request.scope.get(CLIENT_KEY)
    return found
