"""Agents, their versions and their security document."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api import render
from api.deps import Authenticated, Include, Page, canonical_id, extensions_asked
from api.keyed import Answer, Keyed, keyed
from api.schemas.agents import (
    AgentBody,
    AgentPage,
    AgentSecurityBody,
    AgentVersionBody,
    AgentVersionPage,
    CreateAgentBody,
    PublishAgentVersionBody,
    PutAgentSecurityBody,
)
from api.schemas.common import ErrorBody
from api.schemas.waits import check_version
from api.state import State
from broker.errors import Conflict, InvalidRequest, NotFound
from broker.services.credentials import Permission
from broker.services.providers import SCRIPTED_MODEL, SCRIPTED_PROVIDER_ID, SUBAKO_FORMATS
from common.codec import uuid7

router = APIRouter(prefix="/v1/agents", tags=["agents"], responses={400: {"model": ErrorBody}})


@router.post("", status_code=201, response_model=AgentBody)
async def create_agent(body: CreateAgentBody, request: Request, caller: Authenticated, state: State) -> Response:
    caller.require(Permission.AGENT_PUBLISH)

    async def act(keyed_: Keyed) -> Answer:
        record = await state.broker.agents.create(body.name, keyed_.seed["agent_id"])
        return Answer(201, render.agent(record, state.broker.workspace_id).model_dump_json().encode())

    return await keyed(request, caller, act, seed={"agent_id": uuid7()})


@router.get("", response_model=AgentPage)
async def list_agents(caller: Authenticated, state: State, page: Page) -> AgentPage:
    caller.require(Permission.AGENT_READ)
    agents, cursor = await state.broker.agents.page(limit=page.limit, after=page.after, ascending=page.ascending)
    items = [render.agent(a, state.broker.workspace_id) for a in agents]
    return AgentPage.model_validate({"items": items, "next_cursor": cursor})


@router.get("/{agent_id}", response_model=AgentBody)
async def get_agent(agent_id: str, caller: Authenticated, state: State) -> AgentBody:
    caller.require(Permission.AGENT_READ)
    record = await state.broker.agents.get(canonical_id(agent_id, "agent"))
    return render.agent(record, state.broker.workspace_id)


@router.patch("/{agent_id}", response_model=AgentBody)
async def rename_agent(agent_id: str, body: CreateAgentBody, caller: Authenticated, state: State) -> AgentBody:
    caller.require(Permission.AGENT_PUBLISH)
    record = await state.broker.agents.rename(canonical_id(agent_id, "agent"), body.name)
    return render.agent(record, state.broker.workspace_id)


@router.delete("/{agent_id}", status_code=204)
async def delete_agent(agent_id: str, caller: Authenticated, state: State) -> Response:
    """Delete the agent, its versions and its sessions."""
    caller.require(Permission.AGENT_DELETE)
    broker = state.broker
    canonical = canonical_id(agent_id, "agent")
    for session_id in await broker.agents.mark_deleted(canonical):
        try:
            _, ended = await broker.sessions.delete(session_id)
        except NotFound:
            continue
        if ended is not None:
            await state.run_spans.deleted(session_id, canonical, ended)
    await broker.agents.purge(canonical)
    return Response(status_code=204)


async def _check_model(state: State, body: PublishAgentVersionBody) -> None:
    # What the body names must agree with what is stored: a well-formed body that does not is a conflict
    # with the workspace's state (409), not a malformed request, and not a missing agent (404).
    try:
        provider = await state.broker.providers.get(str(body.model_provider_id))
    except NotFound as missing:
        raise Conflict(f"model_provider_id: {missing}") from None
    if provider.format != body.model.format:
        raise Conflict(f"model.format: provider {provider.id} speaks {provider.format}, not {body.model.format}")
    if provider.id == SCRIPTED_PROVIDER_ID and body.model.model != SCRIPTED_MODEL:
        raise Conflict(f"model.model: the Scripted provider serves only the model {SCRIPTED_MODEL!r}")


@router.post("/{agent_id}/versions", status_code=201, response_model=AgentVersionBody)
async def publish_version(
    agent_id: str, body: PublishAgentVersionBody, request: Request, caller: Authenticated, state: State
) -> Response:
    """Publish a version; new sessions run it from now on, existing ones keep theirs."""
    caller.require(Permission.AGENT_PUBLISH)
    canonical = canonical_id(agent_id, "agent")
    await state.broker.agents.get(canonical)
    check_version(body, state.broker.settings.max_wait_s)
    await _check_model(state, body)
    for i, grant in enumerate(body.mcp or []):
        await state.broker.providers.addresses.check_base_url(grant.url, f"mcp[{i}].url", "an MCP server")
        if grant.auth is not None and state.broker.settings.secret_key is None:
            # Its tokens are stored encrypted under a key derived from the secret: without one, nowhere to keep them.
            raise InvalidRequest(
                f"mcp[{i}].auth: an OAuth grant needs SWITCHBOARD_SECRET_KEY set (32 random bytes, url-safe base64)"
            )
    # The config is echoed as given (absent optional keys stay absent), but for the grants' credentials:
    # kept apart, never returned.
    config: dict[str, Any] = body.model_dump(mode="json", exclude_unset=True, exclude={"model_provider_id"})
    for grant in config.get("mcp") or []:
        grant.pop("bearer_token", None)
        grant.pop("headers", None)
        if grant.get("auth"):
            grant["auth"].pop("client_secret", None)
    secrets = {grant.name: kept for grant in body.mcp or [] if (kept := grant.secrets())}

    async def act(keyed_: Keyed) -> Answer:
        record = await state.broker.agents.publish(
            canonical, keyed_.seed["version_id"], config, str(body.model_provider_id), secrets
        )
        return Answer(201, render.version(record).model_dump_json().encode())

    return await keyed(request, caller, act, seed={"version_id": uuid7()})


@router.get("/{agent_id}/versions", response_model=AgentVersionPage)
async def list_versions(
    agent_id: str, caller: Authenticated, state: State, page: Page, include: Include = None
) -> AgentVersionPage:
    """Versions whose model is of a format Switchboard adds (openai_chat, gemini) are listed only with
    `?include=extensions`: the Subako SDK refuses a whole page holding a format it does not know."""
    caller.require(Permission.AGENT_READ)
    versions, cursor = await state.broker.agents.versions(
        canonical_id(agent_id, "agent"), limit=page.limit, after=page.after, ascending=page.ascending
    )
    if not extensions_asked(include):
        versions = [v for v in versions if v.config.get("model", {}).get("format") in SUBAKO_FORMATS]
    return AgentVersionPage.model_validate({"items": [render.version(v) for v in versions], "next_cursor": cursor})


@router.get("/{agent_id}/security", response_model=AgentSecurityBody)
async def get_security(agent_id: str, caller: Authenticated, state: State) -> AgentSecurityBody:
    caller.require(Permission.AGENT_READ)
    record = await state.broker.agents.get(canonical_id(agent_id, "agent"))
    return AgentSecurityBody(allowed_origins=list(record.allowed_origins))


@router.put("/{agent_id}/security", response_model=AgentSecurityBody)
async def put_security(
    agent_id: str, body: PutAgentSecurityBody, caller: Authenticated, state: State
) -> AgentSecurityBody:
    """Replace the whole document; `{}` (or a null list) resets it to no browser origin."""
    caller.require(Permission.AGENT_PUBLISH)
    origins = list(dict.fromkeys(body.allowed_origins or []))
    record = await state.broker.agents.set_security(canonical_id(agent_id, "agent"), origins)
    return AgentSecurityBody(allowed_origins=list(record.allowed_origins))
