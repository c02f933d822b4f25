"""Sessions: create, read, list, delete, cancel the active run, mint tokens."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api import render
from api.deps import Authenticated, KeyManagedSession, ManagedSession, Page
from api.keyed import Answer, Keyed, keyed
from api.schemas.common import ErrorBody, moment
from api.schemas.sessions import (
    CancelOutcomeBody,
    CreatedSessionBody,
    CreatedSessionReceiptBody,
    CreateSessionBody,
    SessionBody,
    SessionPage,
    SessionTokenBody,
    SessionTokenReceiptBody,
)
from api.state import State
from broker.errors import Conflict, NotFound
from broker.services.credentials import Permission
from common.codec import uuid7


def concurrency(config: dict[str, Any]) -> tuple[str, int]:
    """A version's message concurrency (docs/agents-and-models.md) as (policy, debounce ms); `steer` when unset."""
    setting = config.get("message_concurrency") or "steer"
    if isinstance(setting, dict):
        return "debounce", int(setting.get("debounce_ms", 750))
    return str(setting), 750


router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses={400: {"model": ErrorBody}})


@router.post(
    "",
    status_code=201,
    responses={
        201: {"model": CreatedSessionBody},
        200: {"model": CreatedSessionReceiptBody, "description": "A replay"},
    },
)
async def create_session(body: CreateSessionBody, request: Request, caller: Authenticated, state: State) -> Response:
    """Create a session on the agent's live version; its token is shown once."""
    caller.require(Permission.SESSION_CREATE)
    broker = state.broker
    if body.vault_ids:
        raise NotFound(f"no vault {body.vault_ids[0]}: vaults are not provided by this server")
    agent = await broker.agents.get(str(body.agent_id))
    if agent.live_version is None:
        raise Conflict(f"agent {agent.id} has no published version; publish one before creating sessions")
    version_id = agent.live_version
    policy, debounce_ms = concurrency((await broker.agents.version(version_id)).config)
    creator = {"type": "api_key", "api_key_id": caller.id, "label": caller.label}

    async def act(keyed_: Keyed) -> Answer:
        session_id = keyed_.seed["session_id"]
        token = broker.sessions.new_token(session_id)
        session, created = await broker.sessions.create(
            session_id,
            agent_id=agent.id,
            version_id=version_id,
            display_name=body.display_name or "",
            created_by=creator,
            token=token,
            policy=policy,
            debounce_ms=debounce_ms,
            subject=body.subject,
        )
        fields = render.session(session).model_dump(exclude={"created_by"}, exclude_unset=True)
        fields["session_token_expires_at"] = moment(token.expires_at)
        receipt = CreatedSessionReceiptBody.model_validate({**fields, "session_token_id": token.id})
        if not created:
            # An attempt that died after creating it: its token was never shown, so only the receipt is left.
            return Answer(200, receipt.model_dump_json(exclude_unset=True).encode())
        fresh = CreatedSessionBody.model_validate({**fields, "session_token": token.token})
        return Answer(
            201,
            fresh.model_dump_json(exclude_unset=True).encode(),
            200,
            receipt.model_dump_json(exclude_unset=True).encode(),
        )

    return await keyed(request, caller, act, seed={"session_id": uuid7()})


@router.get("", response_model=SessionPage, response_model_exclude_unset=True)
async def list_sessions(caller: Authenticated, state: State, page: Page) -> SessionPage:
    caller.require(Permission.SESSION_READ)
    sessions, cursor = await state.broker.sessions.page(limit=page.limit, after=page.after, ascending=page.ascending)
    return SessionPage.model_validate({"items": [render.session(s) for s in sessions], "next_cursor": cursor})


@router.get("/{session_id}", response_model=SessionBody, response_model_exclude_unset=True)
async def get_session(session_id: str, caller: Authenticated, state: State) -> SessionBody:
    return render.session(await state.broker.sessions.get(caller.reach_session(session_id, Permission.SESSION_READ)))


@router.delete("/{session_id}", status_code=204)
async def delete_session(session_id: str, caller: Authenticated, state: State) -> Response:
    """Delete the session: its active run ends, its streams close, and later requests get 404."""
    caller.require(Permission.SESSION_MANAGE)
    canonical = caller.reach_session(session_id, Permission.SESSION_MANAGE)
    session, ended = await state.broker.sessions.delete(canonical)
    if ended is not None:
        await state.run_spans.deleted(canonical, session.agent_id, ended)
    return Response(status_code=204)


@router.post("/{session_id}/cancel", response_model=CancelOutcomeBody)
async def cancel_run(canonical: ManagedSession, request: Request, caller: Authenticated, state: State) -> Response:
    """Cancel the active run at its next checkpoint (`run_cancelled` follows); `run_id` null when idle."""

    async def act(_: Keyed) -> Answer:
        run_id, ended = await state.broker.runs.cancel_run(canonical)
        if ended and run_id is not None:
            # No worker holds a run that waited: its spans are made here.
            await state.run_spans.finished(canonical, run_id)
        return Answer(200, CancelOutcomeBody.model_validate({"run_id": run_id}).model_dump_json().encode())

    return await keyed(request, caller, act, seed={}, session_id=canonical)


@router.post(
    "/{session_id}/tokens",
    status_code=201,
    responses={201: {"model": SessionTokenBody}, 200: {"model": SessionTokenReceiptBody, "description": "A replay"}},
)
async def mint_token(canonical: KeyManagedSession, request: Request, caller: Authenticated, state: State) -> Response:
    """Mint another session token; the ones already issued stay live."""

    async def act(_: Keyed) -> Answer:
        token = await state.broker.sessions.mint_token(canonical)
        fresh = SessionTokenBody(expires_at=moment(token.expires_at), session_token=token.token)
        receipt = SessionTokenReceiptBody.model_validate(
            {"expires_at": moment(token.expires_at), "id": token.id, "session_id": canonical}
        )
        return Answer(201, fresh.model_dump_json().encode(), 200, receipt.model_dump_json().encode())

    return await keyed(request, caller, act, seed={}, session_id=canonical)
