"""POST /v1/sessions/{sid}/ag-ui: the session behind an AG-UI frontend (docs/ag-ui.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.deps import Caller, existing_session
from api.doors import ag_ui
from api.doors.turns import Started, answer_calls, continuation, decide, post_input
from api.doors.view import RunView
from api.sse import EventStreamResponse, open_stream
from api.state import State

router = APIRouter(prefix="/v1/sessions/{session_id}/ag-ui", tags=["front doors"])


_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {"type": "object", "description": "An AG-UI RunAgentInput (protocol 1.0)"},
        }
    },
}


@router.post("", responses={200: {"content": {"text/event-stream": {}}}}, openapi_extra={"requestBody": _BODY})
async def run_agent(session_id: str, request: Request, caller: Caller, state: State) -> EventStreamResponse:
    """An AG-UI `RunAgentInput` (session token, or an API key with session.manage) answered with AG-UI
    events. The newest user message is the input, `tools` its per-turn client tools; tool messages and
    `resume` entries answer what the previous AG-UI run ended on, and the same run goes on."""
    canonical = await existing_session(state, caller, session_id, "session.manage")
    run = ag_ui.parse(await request.body())
    plan = ag_ui.plan(run)
    # Everything is written before the stream starts, so a refusal is an HTTP error with its field.
    answered = await answer_calls(state, canonical, plan.results)
    decided = [await decide(state, caller, canonical, call_id, payload) for call_id, payload in plan.decisions]
    subscription, close = await open_stream(state, canonical, caller.id)
    try:
        started: Started | None = await continuation(
            state, canonical, [*answered, *(owed for owed in decided if owed is not None)]
        )
        if plan.message_id is not None:
            posted = await post_input(state, caller, canonical, "ag-ui", plan.message_id, plan.text, plan.tools)
            # New input while answering: the stream goes on from the continuation if there is one (the
            # input steers that run), else it shows the run the input started.
            started = started or posted
    except BaseException:
        state.hub.unsubscribe(subscription)
        close()
        raise
    view = None
    if started is not None:
        view = RunView(
            started.run_id,
            started=started.inside,
            step=started.step,
            frontend=started.frontend,
            have=frozenset(owed.call_id for owed in answered) | plan.have,
            known=plan.known,
        )
    encoder = ag_ui.Encoder()
    frames = ag_ui.stream(state, canonical, run, started, view, subscription, encoder)
    return EventStreamResponse(frames, subscription, headers={"Content-Type": encoder.media_type}, on_close=close)
