"""Which model a session's runs call, from its agent version and that version's provider."""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable

from pydantic import SecretStr

from broker import Broker
from broker.errors import NotFound
from broker.services.providers import (
    ANTHROPIC_PROVIDER_ID,
    KEYED_PROVIDERS,
    OPENAI_PROVIDER_ID,
    SCRIPTED_PROVIDER_ID,
    Provider,
    ProviderFormat,
)
from common.clouds import ENVIRONMENT, ENVIRONMENT_SETTING
from common.codec import dumps, sha256_hex
from common.runtime import imported
from workers.config import RunConfig
from workers.models.base import Endpoint, Model, ModelError
from workers.models.scripted import ScriptedModel
from workers.settings import WorkerSettings

# The provider SDKs take seconds to import (anthropic alone ~2.4 s on these machines): a worker imports
# one, in a thread so the steps it runs go on meanwhile, when a session first needs it, and a deployment
# that never calls a vendor never pays for it (worker start went from ~4 s to ~0.8 s).
_MODEL_CLASSES: dict[ProviderFormat, tuple[str, str]] = {
    "anthropic": ("workers.models.anthropic_messages", "AnthropicMessages"),
    "openai_responses": ("workers.models.openai_responses", "OpenAIResponses"),
    "openai_chat": ("workers.models.openai_chat", "OpenAIChat"),
    "gemini": ("workers.models.gemini", "Gemini"),
}


# A model class: a client of one provider, made from where and how it is reached.
ModelClass = Callable[[Endpoint], Model]
# What a session's steps are read with, kept by version rather than by session: a version never changes and
# thousands of sessions (a deployment's parked runs) share a few. A config holds its agent's instructions and
# grants (some KiB), so 256 of them are a few MiB at most.
MAX_VERSIONS = 256
# Which version each recently stepped session is on (it never changes). An entry is its session id and
# the link (some 160 bytes; the version id is shared), so this many are about 330 KiB: more sessions
# than a worker steps in a few minutes at its MAX_JOBS, and a session past it costs one read of its
# record at its next step. 10,000 held 2.4 MiB, most of what a worker's heap kept after 10,000 runs
# were parked (docs/performance.md, scenario 18).
MAX_SESSIONS = 2048
# (model provider id, agent id, run config) of a version.
_Version = tuple[str, str, RunConfig]


class ModelRegistry:
    """Resolves a session to its model and config; versions never change, so both are cached."""

    def __init__(self, broker: Broker[WorkerSettings]) -> None:
        self._broker = broker
        self._scripted = ScriptedModel()
        settings = broker.settings
        # The platform providers this worker holds the deployment's keys for: (format, URL, key) by id.
        keyed = {
            OPENAI_PROVIDER_ID: (settings.openai_base_url, settings.openai_api_key),
            ANTHROPIC_PROVIDER_ID: (settings.anthropic_base_url, settings.anthropic_api_key),
        }
        self._platform: dict[str, tuple[ProviderFormat, str, SecretStr]] = {
            provider_id: (KEYED_PROVIDERS[provider_id][0], base_url, key)
            for provider_id, (base_url, key) in keyed.items()
            if key is not None
        }
        # Most recently used last; both bounded, so a worker's memory does not grow with the sessions it
        # ever stepped (a parked run's session is stepped once and then waits for weeks).
        self._versions: OrderedDict[str, _Version] = OrderedDict()
        self._sessions: OrderedDict[str, str] = OrderedDict()
        self._clients: dict[str, Model] = {}
        self._classes: dict[str, ModelClass] = {}

    @property
    def offers(self) -> tuple[str, ...]:
        """The platform providers this worker can call: it offers them to the API (workers/keeper.py)."""
        return tuple(self._platform)

    async def aclose(self) -> None:
        """Close the provider clients (their connection pools)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    async def config_for(self, session_id: str) -> RunConfig:
        """The run config of the session's agent version; ModelError when that version is gone."""
        _, _, config = await self._version_of(session_id)
        return config

    async def billed_to(self, session_id: str) -> tuple[str, str]:
        """The provider id and agent id of the session's version (what its tokens count under)."""
        provider_id, agent_id, _ = await self._version_of(session_id)
        return provider_id, agent_id

    async def model_for(self, session_id: str) -> Model:
        """The session's model: the scripted one, or a client of its provider (whose SDK is imported on
        first use); ModelError when the provider was deleted."""
        provider_id, _, _ = await self._version_of(session_id)
        _, model = await self.client_for(provider_id)
        return model

    async def client_for(self, provider_id: str) -> tuple[ProviderFormat, Model]:
        """A provider's format and a client of it (the scripted model for the scripted provider); ModelError
        when it is not there or this worker holds no key for it."""
        if provider_id == SCRIPTED_PROVIDER_ID:
            return "openai_responses", self._scripted
        platform = self._platform.get(provider_id)
        if platform is not None:
            # The deployment's own provider: its URL is the operator's to choose, so no address check.
            provider_format, base_url, key = platform
            model = await self._model_class(provider_format)
            endpoint = Endpoint(base_url, key.get_secret_value(), self._broker.settings.step_timeout_s)
            return provider_format, self._client(provider_id, provider_format, endpoint, model)
        if provider_id in KEYED_PROVIDERS:
            name = KEYED_PROVIDERS[provider_id][1]
            raise ModelError(f"this worker has no key for the platform provider {name}")
        try:
            provider = await self._broker.providers.get(provider_id)
        except NotFound:
            raise ModelError(f"model provider {provider_id} was deleted") from None
        # A workspace's provider is reached only through the address check.
        model = await self._model_class(provider.format)
        return provider.format, self._client(provider.id, provider.format, self._endpoint(provider), model)

    def _endpoint(self, provider: Provider) -> Endpoint:
        # A cloud's credentials: the stored ones, {} for none (the api_key serves), None for the worker's
        # own identity, which the deployment must allow here as well as in the API (the setting may have
        # been turned off since the provider was stored).
        credentials = provider.credentials
        if credentials == ENVIRONMENT and not self._broker.settings.cloud_environment_credentials:
            raise ModelError(
                f"model provider {provider.id} uses the worker's own cloud identity, which this deployment does"
                f" not allow ({ENVIRONMENT_SETTING} is off)"
            )
        return Endpoint(
            provider.base_url,
            provider.api_key,
            self._broker.settings.step_timeout_s,
            self._broker.providers.addresses,
            cloud=provider.cloud,
            credentials=None if isinstance(credentials, str) else dict(credentials or {}),
            text_only=provider.text_only,
        )

    async def _version_of(self, session_id: str) -> _Version:
        version_id = self._sessions.get(session_id)
        if version_id is None:
            try:
                version_id = (await self._broker.sessions.get(session_id)).agent_version_id
            except NotFound as error:
                raise ModelError(f"the session's agent version is gone: {error.message}") from None
            # Thousands of sessions are on a few versions: one string for them all rather than one each.
            version_id = sys.intern(version_id)
            self._sessions[session_id] = version_id
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(session_id)
        found = self._versions.get(version_id)
        if found is None:
            try:
                version = await self._broker.agents.version(version_id)
            except NotFound as error:
                raise ModelError(f"the session's agent version is gone: {error.message}") from None
            config = RunConfig.of(version.config, self._broker.settings.max_steps, version.secrets)
            found = self._versions[version_id] = (version.model_provider_id, version.agent_id, config)
            while len(self._versions) > MAX_VERSIONS:
                self._versions.popitem(last=False)
        else:
            self._versions.move_to_end(version_id)
        return found

    async def _model_class(self, provider_format: ProviderFormat) -> ModelClass:
        """The model class serving `provider_format`."""
        name, attribute = _MODEL_CLASSES[provider_format]
        if name not in self._classes:
            module = await imported(name)
            self._classes[name] = getattr(module, attribute)
        return self._classes[name]

    def _client(self, provider_id: str, provider_format: str, endpoint: Endpoint, model: ModelClass) -> Model:
        # A provider whose URL, key or options changed gets a new client; the old one is simply dropped.
        reached = dumps(
            [
                endpoint.base_url,
                endpoint.api_key,
                dict(endpoint.cloud or {}),
                # None (the worker's own identity) differs from {} (the api_key alone).
                None if endpoint.credentials is None else dict(endpoint.credentials),
                endpoint.text_only,
            ]
        )
        identity = sha256_hex(f"{provider_id}\n{provider_format}\n{reached}")
        if identity not in self._clients:
            self._clients[identity] = model(endpoint)
        return self._clients[identity]
