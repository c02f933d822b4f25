"""Broker records as wire bodies."""

from __future__ import annotations

from api.schemas.agents import AgentBody, AgentVersionBody
from api.schemas.common import moment, optional_moment
from api.schemas.keys import ActorBody, ApiKeyBody, ApiKeyReceiptBody
from api.schemas.providers import ByokProviderBody, PlatformModelBody, PlatformProviderBody
from api.schemas.sessions import ApiKeyCreator, SessionBody, UserCreator
from broker.services.agents import Agent, AgentVersion
from broker.services.credentials import ApiKey
from broker.services.providers import Provider
from broker.services.sessions import Session


def agent(record: Agent, workspace_id: str) -> AgentBody:
    return AgentBody.model_validate(
        {"created_at": moment(record.created_at), "id": record.id, "name": record.name, "workspace_id": workspace_id}
    )


def version(record: AgentVersion) -> AgentVersionBody:
    return AgentVersionBody.model_validate(
        {
            "agent_id": record.agent_id,
            "config": record.config,
            "created_at": moment(record.created_at),
            "id": record.id,
            "model_provider_id": record.model_provider_id,
            "version": record.version,
        }
    )


def api_key_receipt(record: ApiKey) -> ApiKeyReceiptBody:
    return ApiKeyReceiptBody.model_validate(
        {
            "created_at": moment(record.created_at),
            "expires_at": optional_moment(record.expires_at),
            "id": record.id,
            "label": record.label,
            "permissions": list(record.permissions),
            "prefix": record.prefix,
        }
    )


def api_key(record: ApiKey) -> ApiKeyBody:
    return ApiKeyBody.model_validate(
        {
            **api_key_receipt(record).model_dump(),
            "created_by": ActorBody.model_validate(record.created_by),
            "last_used_at": optional_moment(record.last_used_at),
            "revoked_at": optional_moment(record.revoked_at),
        }
    )


def provider(record: Provider, workspace_id: str) -> PlatformProviderBody | ByokProviderBody:
    shared = {
        "created_at": moment(record.created_at),
        "description": record.description,
        "display_name": record.display_name,
        "format": record.format,
        "id": record.id,
    }
    if record.type == "platform":
        models = [
            PlatformModelBody(model=m.model, display_name=m.display_name, description=m.description)
            for m in record.models
        ]
        return PlatformProviderBody.model_validate({**shared, "type": "platform", "models": models})
    # The non-secret options only: a cloud's credentials, like the api_key, are never rendered.
    options = {"text_only": record.text_only, "cloud": record.cloud}
    return ByokProviderBody.model_validate({**shared, "type": "byok", "workspace_id": workspace_id, **options})


def session(record: Session) -> SessionBody:
    creator = record.created_by
    created_by = (
        ApiKeyCreator.model_validate(creator)
        if creator.get("type") == "api_key"
        else UserCreator.model_validate(creator)
    )
    # `subject` is an extension: written only when the session has one, and the routes leave out what is
    # unset, so a session without one reads exactly as the Subako wire has it.
    subject = {} if record.subject is None else {"subject": record.subject}
    return SessionBody.model_validate(
        {
            **subject,
            "agent_id": record.agent_id,
            "agent_version_id": record.agent_version_id,
            "created_at": moment(record.created_at),
            "created_by": created_by,
            "display_name": record.display_name,
            "id": record.id,
            "status": "active" if record.active else "idle",
            "workspace_id": record.workspace_id,
        }
    )
