"""Which model a session's runs call, from its agent version and that version's provider."""

from __future__ import annotations

from broker import Broker
from broker.errors import NotFound
from broker.providers import SCRIPTED_PROVIDER_ID
from workers.models.base import Model, ModelError
from workers.models.scripted import ScriptedModel


class ModelRegistry:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._scripted = ScriptedModel()

    async def for_session(self, session_id: str) -> Model:
        try:
            session = await self._broker.sessions.get(session_id)
            version = await self._broker.agents.version(session.agent_version_id)
        except NotFound as error:
            raise ModelError(f"the session's agent version is gone: {error.message}") from None
        if version.model_provider_id == SCRIPTED_PROVIDER_ID:
            return self._scripted
        try:
            provider = await self._broker.providers.get(version.model_provider_id)
        except NotFound:
            raise ModelError(f"model provider {version.model_provider_id} was deleted") from None
        raise ModelError(
            f"model provider {provider.display_name!r} ({provider.format}) cannot be called by this deployment yet; "
            "only the built-in scripted model runs"
        )
