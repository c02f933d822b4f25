"""The names a session's client tools go by on its two MCP endpoints: `/mcp` shows the names a model
sees (`client__<name>__<tool>`, a run-scoped tool its own name); `/mcp/{client_name}` shows one client's
tools under their own names (`highlight_row`), whichever registration holds that client name now. Policies
and the call itself always go by the model-visible name, so both endpoints are held to the same rules."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path

from broker.services.runs import CLIENT_TOOL_PREFIX, OfferedClient

# A client name as registering a client takes it (api/schemas/clients.py RegisterClientBody.name).
ClientName = Annotated[str, Path(min_length=1, max_length=32, pattern=r"^[a-z0-9-]+$")]


def shown(client_name: str | None, visible: str, client: OfferedClient, tool: dict[str, Any]) -> str | None:
    """The name the tool a model sees as `visible` has on the endpoint of `client_name` (None: `/mcp`),
    or None when that endpoint does not serve it."""
    if client_name is None:
        return visible
    if client.scoped or client.name != client_name:
        return None
    return str(tool["name"])


def visible(client_name: str | None, name: str) -> str:
    """The model-visible name of the tool a caller of `client_name`'s endpoint calls `name`."""
    return name if client_name is None else f"{CLIENT_TOOL_PREFIX}{client_name}__{name}"
