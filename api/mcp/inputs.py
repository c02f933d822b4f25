"""Input requests of a call relayed to its MCP caller (a placeholder: the relaying lands with the input
requests of the session MCP server)."""

from __future__ import annotations

from typing import Any

from api.state import AppState

NOT_SUPPORTED = "input responses are not supported yet"


async def input_requests(state: AppState, session_id: str, call_id: str) -> dict[str, Any]:
    """The call's open input requests as MCP's `inputRequests` map (key -> request)."""
    return {}


async def answer_responses(state: AppState, session_id: str, call_id: str, responses: dict[str, Any]) -> str | None:
    """Answer the call's open input requests with MCP `inputResponses` (key -> response): None once
    answered, else the reason they were not."""
    return NOT_SUPPORTED
