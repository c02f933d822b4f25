"""/v1/sessions/{sid}/ai-sdk/chat: the session behind the AI SDK's `useChat` (docs/ai-sdk.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from api.deps import Authenticated, ManagedSession
from api.doors import ai_sdk
from api.doors.shown import Paused
from api.doors.turns import Opened, Started, active_run, hand_over, open_turn
from api.doors.view import RunView
from api.errors import require_json_type
from api.schemas.common import ErrorBody
from api.sse import EventStreamResponse, open_stream
from api.state import AppState, State

router = APIRouter(
    prefix="/v1/sessions/{session_id}/ai-sdk/chat", tags=["front doors"], responses={400: {"model": ErrorBody}}
)

_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "description": "What the AI SDK's DefaultChatTransport sends (`id`, `messages`, `trigger`, "
                "`messageId`), plus `tools`: the frontend's tools, each `{name, description, parameters}`",
            }
        }
    },
}
_STREAM: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {}}}}
ChatId = Annotated[str, Path(max_length=256)]


def _response(state: AppState, session_id: str, opened: Opened, message_id: str, tools: frozenset[str]) -> Response:
    started, view = opened.started, opened.view
    if started is None or view is None:
        opened.close()
        state.hub.unsubscribe(opened.subscription)
        return Response(status_code=204)

    # Input requests are data parts here, answered at their route while the stream goes on.
    view.pause_on_input = False

    async def paused(pause: Paused) -> None:
        await hand_over(state, session_id, view.frontend, pause.calls)

    chunks = ai_sdk.Chunks(tools)
    frames = ai_sdk.stream(state, session_id, started.after, message_id, view, chunks, opened.subscription, paused)
    return EventStreamResponse(frames, opened.subscription, headers=ai_sdk.HEADERS, on_close=opened.close)


@router.post("", responses=_STREAM, openapi_extra={"requestBody": _BODY})
async def chat(canonical: ManagedSession, request: Request, caller: Authenticated, state: State) -> Response:
    """A `useChat` request (session token, or an API key with session.manage) answered with the UI
    message stream (v1). The newest user message is the input and `tools` its per-turn client tools; a
    resubmitted assistant message's tool outputs and approval responses continue the same run. 204 when
    there is nothing to do."""
    require_json_type(request)
    turn, continues = ai_sdk.read(await request.body())
    opened = await open_turn(state, caller, canonical, "ai-sdk", turn)
    tools = frozenset(tool["name"] for tool in turn.tools or [])
    # One UI message per run, named by the run; input that steered a run already going gets a message
    # of its own (the run's id and where the message starts). A continuation keeps its message's id.
    started = opened.started
    message_id = continues or ""
    if not message_id and started is not None:
        message_id = f"{started.run_id}.{started.after}" if started.inside else started.run_id
    return _response(state, canonical, opened, message_id, tools)


@router.get("/{chat_id}/stream", responses={**_STREAM, 204: {"description": "No active stream"}})
async def resume(
    session_id: str, chat_id: ChatId, canonical: ManagedSession, caller: Authenticated, state: State
) -> Response:
    """The active stream again (the transport's `resume: true`), from the log: the session's newest run,
    whole, if it has not ended; 204 when it has."""
    subscription, close = await open_stream(state, canonical, caller.id)
    try:
        started: Started | None = await active_run(state, canonical)
    except BaseException:
        state.hub.unsubscribe(subscription)
        close()
        raise
    view = RunView(started.run_id, frontend=started.frontend) if started is not None else None
    opened = Opened(started, view, subscription, close)
    message_id = started.run_id if started is not None else ""
    return _response(state, canonical, opened, message_id, started.tools if started is not None else frozenset())
