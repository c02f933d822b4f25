"""A session's events: post input, read the log a page at a time, follow it live (SSE)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response

from api.deps import Authenticated, ManagedSession, ReadSession
from api.hot import HotRequest, receipt_of
from api.keyed import respond
from api.schemas.common import DEFAULT_LIMIT, MAX_LIMIT, ErrorBody, Order
from api.schemas.events import SessionEventPage
from api.schemas.sessions import PostSessionEventBody, SubmitOutcomeBody
from api.schemas.waits import check_tools
from api.sse import EventStreamResponse, LiveCursor, as_seen, event_stream, open_stream, shown
from api.state import AppState, State
from broker.errors import Forbidden
from common.codec import uuid7
from common.events.catalogue import LOG_INCLUDES, STREAM_INCLUDES
from common.tracing import SpanRef

# A seq: at most 18 digits (within a Redis integer); as text on the stream, where empty is none.
MAX_SEQ = 10**18 - 1
SEQ = "^[0-9]{0,18}$"

router = APIRouter(prefix="/v1/sessions/{session_id}/events", tags=["events"], responses={400: {"model": ErrorBody}})


@router.post("", response_model=SubmitOutcomeBody)
async def post_input(
    canonical: ManagedSession, body: PostSessionEventBody, request: Request, caller: Authenticated, state: State
) -> Response:
    """Post input: it starts a run, or (by the agent's message concurrency) steers, queues or is refused
    during an active one. `client_tools` (an extension) are offered for that run only."""
    if body.source == "external" and caller.kind != "api_key":
        raise Forbidden("source: 'external' marks input posted with an API key on behalf of a user")
    broker = state.broker
    check_tools("client_tools", body.client_tools, broker.settings.max_wait_s)
    tools = [tool.model_dump(exclude_none=True) for tool in body.client_tools] if body.client_tools else None

    # The Idempotency-Key's receipt is read and kept by the input's own script, in the same step.
    receipt = receipt_of(state, await HotRequest.of(request), canonical, caller.id, broker.settings.idempotency_ttl_ms)
    scoped = (uuid7(), tools) if tools is not None else None
    run_id = uuid7()
    traced = await _traced_input(state, canonical, run_id, request.headers.get("traceparent"))
    submitted = await broker.runs.submit(
        canonical,
        run_id,
        uuid7(),
        body.text,
        body.source or "client",
        scoped,
        scoped_ttl_s=body.client_tools_ttl_s,
        receipt=receipt,
    )
    if traced and submitted.run_id != run_id:
        # Steered or taken before: the input joined a run that had its trace already.
        await broker.traces.ended(canonical, run_id)
    return respond(200, submitted.body)


async def _traced_input(state: AppState, session_id: str, run_id: str, traceparent: str | None) -> bool:
    """Keep the caller's trace for the run this input may start, before any worker can begin it."""
    if not state.tracing.enabled:
        return False
    parent = SpanRef.parse(traceparent)
    if parent is None:
        return False
    await state.broker.traces.started(session_id, run_id, parent.traceparent, time.time_ns())
    return True


def _include_query(names: tuple[str, ...], description: str) -> Any:
    name = "(" + "|".join(names) + ")"
    return Query(description=description, pattern=f"^({name}(,{name})*)?$")


_INCLUDE_TEXT = (
    "Extensions, comma separated: `timing` (per step and per run timing as `custom` events), `progress` "
    "(`client_tool_progress` events), `images` (image blocks of results, otherwise a text block naming each), "
    "`extensions` (events of Switchboard's own the Subako SDK does not know: `client_tool_waiting`, "
    "`input_requested`, `input_provided`)"
)
LOG_INCLUDE = _include_query(LOG_INCLUDES, _INCLUDE_TEXT)
STREAM_INCLUDE = _include_query(
    STREAM_INCLUDES,
    _INCLUDE_TEXT + ", `deltas` (text and tool-call arguments as they stream: `message_delta` and "
    "`tool_call_delta` frames with no id) and, with `deltas`, `thinking` (what the model reasons as it streams, "
    "where the provider shows it: `thinking_delta` frames with no id)",
)


def _include(raw: str | None) -> frozenset[str]:
    return frozenset(raw.split(",")) if raw else frozenset()


@router.get("", response_model=SessionEventPage)
async def list_events(
    canonical: ReadSession,
    state: State,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    after_seq: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
    before_seq: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
    order: Annotated[Order, Query(description="Newest first when omitted")] = "desc",
    include: Annotated[str | None, LOG_INCLUDE] = None,
) -> Response:
    """The log in pages; both bounds exclusive; the cursor is the seq of the page's last event."""
    asked = _include(include)
    page = await state.broker.log.page(
        canonical,
        ascending=order == "asc",
        limit=limit,
        after_seq=after_seq,
        before_seq=before_seq,
        keep=lambda item: shown(item, asked),
    )
    cursor = "null" if page.next_cursor is None else str(page.next_cursor)
    # The stored events are sent as stored: no decode and re-encode per event.
    items = (as_seen(item, asked) for item in page.items)
    body = b'{"items":[' + b",".join(items) + b'],"next_cursor":' + cursor.encode() + b"}"
    return Response(body, media_type="application/json")


def _position(after_seq: str | None, last_event_id: str | None) -> int | None:
    for raw in (after_seq, last_event_id):
        if raw:
            return int(raw)
    return None


@router.get("/stream", responses={200: {"content": {"text/event-stream": {}}}})
async def stream_events(
    canonical: ReadSession,
    caller: Authenticated,
    state: State,
    after_seq: Annotated[
        str | None, Query(description="Replay after this seq (0: the whole log; empty: from now)", pattern=SEQ)
    ] = None,
    last_event_id: Annotated[
        str | None, Header(alias="Last-Event-ID", description="As after_seq; after_seq wins", pattern=SEQ)
    ] = None,
    include: Annotated[str | None, STREAM_INCLUDE] = None,
) -> EventStreamResponse:
    """Server-sent events: a cursor frame first (`id: N`), then every event after N, for as long as the
    session lives. The stream ends, and a reconnect gets 404, only when the session is deleted. 429 when
    the session or the credential already holds as many streams as the server allows."""
    asked = _include(include)
    position = _position(after_seq, last_event_id)
    if position is None:
        # Fixed now, before the headers go out: everything appended from here on is delivered.
        position = await state.broker.log.head(canonical)
    subscription, close = await open_stream(state, canonical, caller.id)
    cursor = LiveCursor(position, asked)
    frames = event_stream(state, canonical, cursor, subscription)
    return EventStreamResponse(frames, subscription, on_close=close, cursor=cursor)
