"""Client registrations: register, ping, replace tools, leave; ack and answer the calls dispatched to them."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response

from api import hot
from api.deps import Authenticated, ManagedSession, ReadSession, canonical_id
from api.hot import POOL_MEMBER_HEADER, HotRequest
from api.keyed import respond
from api.pool_stream import call_stream
from api.schemas.clients import (
    ActiveClientBody,
    ActiveClientsBody,
    ClientCallProgressBody,
    ClientCallResultBody,
    ClientPingBody,
    ClientToolBody,
    RegisterClientBody,
    RegisteredClientBody,
    TtlLifetime,
    UpdateClientToolsBody,
)
from api.schemas.common import ErrorBody, moment, optional_moment
from api.schemas.events import SessionEvent
from api.schemas.session_events import ClientToolProgress
from api.schemas.waits import check_tools
from api.sse import EventStreamResponse, open_stream
from api.state import State
from broker.services.pools import MAX_PREFETCH
from common.codec import uuid7

router = APIRouter(prefix="/v1/sessions/{session_id}/clients", tags=["clients"], responses={400: {"model": ErrorBody}})


def _tools(tools: list[ClientToolBody] | None) -> list[dict[str, Any]]:
    # A deadline a tool does not declare is left out, not stored as null.
    return [tool.model_dump(exclude_none=True) for tool in tools or []]


@router.get("", response_model=ActiveClientsBody)
async def list_clients(canonical: ReadSession, state: State) -> ActiveClientsBody:
    """The session's active registrations, oldest first, with their tools and when a ttl one lapses
    unless it pings (an extension)."""
    active = await state.broker.clients.active(canonical)
    return ActiveClientsBody(
        items=[
            ActiveClientBody(
                id=UUID(client.id),
                name=client.name,
                lifetime=client.lifetime,
                expires_at=optional_moment(client.expires_at),
                created_at=moment(client.created_at),
                tools=client.tools,
            )
            for client in active
        ]
    )


@router.post("", status_code=201, response_model=RegisteredClientBody)
async def register_client(
    canonical: ManagedSession, body: RegisterClientBody, request: Request, caller: Authenticated, state: State
) -> Response:
    """Register a client; a name in use among active clients gets the smallest free `-2`, `-3`, ..."""
    check_tools("tools", body.tools, state.broker.settings.max_wait_s)
    ttl_s = body.lifetime.data.seconds if isinstance(body.lifetime, TtlLifetime) else None
    # The Idempotency-Key's receipt is read and kept by the registering script itself, as the hot routes'
    # are: one step, so a repeated key never registers twice and never waits for another attempt.
    receipt = hot.receipt_of(
        state, await HotRequest.of(request), canonical, caller.id, state.broker.settings.idempotency_ttl_ms
    )
    registered = await state.broker.clients.register(canonical, uuid7(), body.name, ttl_s, _tools(body.tools), receipt)
    return respond(201, registered.body)


@router.post("/{client_id}/ping", response_model=ClientPingBody)
async def ping_client(session_id: str, client_id: str, request: Request, state: State) -> Response:
    """Keep a ttl client alive until now + ttl; 404 once it has lapsed (register again)."""
    return respond(200, await hot.ping(state, await HotRequest.of(request), session_id, client_id))


@router.delete("/{client_id}", status_code=204)
async def leave_client(session_id: str, client_id: str, canonical: ManagedSession, state: State) -> Response:
    """Leave: the name is released and the calls still owed an answer fail with `client_gone`."""
    await state.broker.clients.leave(canonical, canonical_id(client_id, "client"))
    return Response(status_code=204)


@router.put("/{client_id}/tools", response_model=SessionEvent)
async def replace_tools(
    session_id: str, client_id: str, canonical: ManagedSession, body: UpdateClientToolsBody, state: State
) -> Response:
    """Replace the whole tool set; answers with the `client_tools_updated` event."""
    check_tools("tools", body.tools, state.broker.settings.max_wait_s)
    event = await state.broker.clients.update_tools(canonical, canonical_id(client_id, "client"), _tools(body.tools))
    return respond(200, event)


@router.post("/{client_id}/calls/{call_id:path}/ack", response_model=SessionEvent)
async def ack_call(session_id: str, client_id: str, call_id: str, request: Request, state: State) -> Response:
    """Acknowledge a call (the result deadline starts); answers with the `client_tool_acked` event."""
    return respond(200, await hot.ack(state, await HotRequest.of(request), session_id, client_id, call_id))


@router.post("/{client_id}/calls/{call_id:path}/progress", response_model=ClientToolProgress)
async def call_progress(
    session_id: str,
    client_id: str,
    call_id: str,
    request: Request,
    state: State,
    body: ClientCallProgressBody | None = None,
) -> Response:
    """Progress on a call this client acked (an extension): appends `client_tool_progress`, which readers
    see with `?include=progress`; for a tool that declared `heartbeat_s` it also keeps the call alive (no
    body at all is a bare heartbeat). 409 before the ack and once the call is settled."""
    given = body or ClientCallProgressBody()
    return respond(200, await hot.progress(state, await HotRequest.of(request), session_id, client_id, call_id, given))


@router.post("/{client_id}/calls/{call_id:path}/result", status_code=204)
async def answer_call(
    session_id: str, client_id: str, call_id: str, body: ClientCallResultBody, request: Request, state: State
) -> Response:
    """Answer a call; it reaches the log as its `tool_result`. A result without an ack acks first."""
    await hot.answer(state, await HotRequest.of(request), session_id, client_id, call_id, body)
    return Response(status_code=204)


@router.get("/{client_id}/calls/stream", responses={200: {"content": {"text/event-stream": {}}}})
async def stream_calls(
    session_id: str,
    client_id: str,
    canonical: ManagedSession,
    caller: Authenticated,
    state: State,
    prefetch: Annotated[int, Query(ge=1, le=MAX_PREFETCH, description="Most calls held unacked at once")] = 16,
) -> EventStreamResponse:
    """Worker pools (an extension): this connection becomes one member of the pool serving the
    registration, and receives `data: <client_tool_dispatched event>` frames for the calls handed to it
    alone, never more than `prefetch` unacked at once. Ack each with the `Switchboard-Pool-Member` header
    set to the member name this response's header of that name gives: the member that acks owns the call;
    one that does not ack within `SWITCHBOARD_POOL_CLAIM_S` loses it to another member. The stream ends
    when the registration or the session does."""
    cid = canonical_id(client_id, "client")
    subscription, close = await open_stream(state, canonical, caller.id)
    member = state.broker.pools.new_member()
    try:
        # Subscribed first, so a call dispatched from here on wakes the member.
        first = await state.broker.pools.take(canonical, cid, member, reclaim=True, prefetch=prefetch)
    except BaseException:
        state.hub.unsubscribe(subscription)
        close()
        raise
    frames = call_stream(state, canonical, cid, member, prefetch, subscription, first)
    return EventStreamResponse(frames, subscription, headers={POOL_MEMBER_HEADER: member}, on_close=close)
