"""POST /v1/sessions/{sid}/ag-ui: the session behind an AG-UI frontend (docs/ag-ui.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.deps import Authenticated, ManagedSession
from api.doors import ag_ui, ag_ui_input
from api.doors.turns import open_turn
from api.errors import require_json_type
from api.schemas.common import ErrorBody
from api.sse import EventStreamResponse
from api.state import State

router = APIRouter(
    prefix="/v1/sessions/{session_id}/ag-ui", tags=["front doors"], responses={400: {"model": ErrorBody}}
)


_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {"type": "object", "description": "An AG-UI RunAgentInput (protocol 1.0)"},
        }
    },
}


@router.post(
    "",
    responses={200: {"content": {"text/event-stream": {}, "application/vnd.ag-ui.event+proto": {}}}},
    openapi_extra={"requestBody": _BODY},
)
async def run_agent(
    canonical: ManagedSession, request: Request, caller: Authenticated, state: State
) -> EventStreamResponse:
    """An AG-UI `RunAgentInput` (session token, or an API key with session.manage) answered with AG-UI
    events. The newest user message is the input, `tools` its per-turn client tools; tool messages and
    `resume` entries answer what the previous AG-UI run ended on, and the same run goes on. An `Accept`
    naming application/vnd.ag-ui.event+proto gets AG-UI's binary encoding instead of SSE."""
    require_json_type(request)
    run = ag_ui_input.read(await request.body())
    opened = await open_turn(state, caller, canonical, "ag-ui", run.turn)
    encoder = ag_ui.Encoder.for_accept(request.headers.get("accept", ""))
    frames = ag_ui.stream(
        state, canonical, run.thread_id, run.run_id, opened.started, opened.view, opened.subscription, encoder
    )
    headers = {"Content-Type": encoder.media_type}
    return EventStreamResponse(frames, opened.subscription, headers=headers, on_close=opened.close)
