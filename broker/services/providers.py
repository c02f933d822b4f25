"""Model providers: the platform ones (the scripted model, and those the deployment's keys enable) and the
workspace's own (BYOK), listed together. A BYOK provider's API key is stored and never read back out.

The deployment's keys are the workers' alone (`WorkerSettings`; the API's settings have none): a worker
holding one offers its platform provider for a keeper lease with every beat (`offer`), and the platform
providers listed, and accepted in an agent version, are the scripted one and those a live worker offers."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from broker.core import Core
from broker.errors import Conflict, InvalidRequest, NotFound, translate_redis_errors
from broker.services.pages import id_page, records
from broker.transport import aio
from common.addresses import ProviderAddresses
from common.clouds import (
    ENVIRONMENT,
    Credentials,
    check_credentials,
    check_environment_base_url,
    check_format,
    decode_cloud,
    decode_credentials,
    encode_cloud,
    encode_credentials,
)
from common.codec import now_ms

ProviderFormat = Literal["anthropic", "openai_responses", "openai_chat", "gemini"]
PROVIDER_FORMATS: tuple[ProviderFormat, ...] = ("anthropic", "openai_responses", "openai_chat", "gemini")
# The formats the Subako enum names. The others are Switchboard's extensions: the Subako SDK refuses a whole
# page that holds one, so listings show them only to a caller that asks (`?include=extensions`).
SUBAKO_FORMATS: frozenset[str] = frozenset({"anthropic", "openai_responses"})

# Platform ids sort before every UUIDv7, so they close a newest-first listing.
SCRIPTED_PROVIDER_ID = "00000000-0000-7000-8000-000000000001"
OPENAI_PROVIDER_ID = "00000000-0000-7000-8000-000000000002"
ANTHROPIC_PROVIDER_ID = "00000000-0000-7000-8000-000000000003"
SCRIPTED_MODEL = "scripted"
# The platform providers a deployment's key enables (SWITCHBOARD_OPENAI_API_KEY, _ANTHROPIC_API_KEY), by
# id: their format, name and description.
KEYED_PROVIDERS: dict[str, tuple[ProviderFormat, str, str]] = {
    OPENAI_PROVIDER_ID: ("openai_responses", "OpenAI", "OpenAI Responses API with the deployment's key."),
    ANTHROPIC_PROVIDER_ID: ("anthropic", "Anthropic", "Anthropic Messages API with the deployment's key."),
}
_PLATFORM_IDS = frozenset({SCRIPTED_PROVIDER_ID, *KEYED_PROVIDERS})


@dataclass(frozen=True, slots=True)
class PlatformModel:
    model: str
    display_name: str
    description: str


@dataclass(frozen=True, slots=True)
class Provider:
    id: str
    type: Literal["platform", "byok"]
    format: ProviderFormat
    display_name: str
    description: str
    created_at: int
    models: tuple[PlatformModel, ...] = ()
    base_url: str = ""
    api_key: str = field(default="", repr=False)
    # An extension: the provider takes no images (tool results' images reach it as their text placeholder).
    text_only: bool = False
    # Extensions (common/clouds.py): the cloud the provider is bought through, with its non-secret options,
    # and that cloud's credentials (write-only, like api_key).
    cloud: dict[str, str] | None = None
    credentials: Credentials = field(default=None, repr=False)


def _workspace_born(workspace_id: str) -> int:
    """The workspace id is a UUIDv7: its first 48 bits are the ms it was fixed at."""
    return uuid.UUID(workspace_id).int >> 80


def _scripted(born: int) -> Provider:
    return Provider(
        id=SCRIPTED_PROVIDER_ID,
        type="platform",
        format="openai_responses",
        display_name="Scripted",
        description="A built-in model with fixed behaviour, for demos, tests and benchmarks; no network.",
        created_at=born,
        models=(
            PlatformModel(
                SCRIPTED_MODEL,
                "Scripted",
                "`/call <tool> {json}` lines become parallel tool calls, `/sleep <s>` waits, `/fail <msg>`"
                " fails the run; anything else is echoed back as `You said: <input>`.",
            ),
        ),
    )


def _keyed(provider_id: str, born: int) -> Provider:
    provider_format, name, description = KEYED_PROVIDERS[provider_id]
    return Provider(provider_id, "platform", provider_format, name, description, born)


class Providers:
    def __init__(self, core: Core, addresses: ProviderAddresses) -> None:
        self._core = core
        # The workers check every connection to a workspace provider with this too.
        self.addresses = addresses

    async def offer(self, provider_ids: Iterable[str], ttl_ms: int) -> None:
        """Say, for `ttl_ms`, that a live worker holds the deployment's keys for these platform providers
        (a worker renews it with every beat)."""
        keys = self._core.keys
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                for provider_id in provider_ids:
                    pipe.set(keys.platform_offer(provider_id), "1", px=ttl_ms)
                await pipe.execute()

    async def _offered(self, provider_ids: list[str]) -> list[str]:
        """Those of the platform providers `provider_ids` a live worker offers."""
        names = [self._core.keys.platform_offer(provider_id) for provider_id in provider_ids]
        with translate_redis_errors():
            marks = await self._core.redis.mget(*names)
        return [provider_id for provider_id, mark in zip(provider_ids, marks, strict=True) if mark is not None]

    async def _platform(self) -> list[Provider]:
        born = _workspace_born(self._core.workspace_id)
        offered = await self._offered(list(KEYED_PROVIDERS))
        return [_scripted(born), *(_keyed(provider_id, born) for provider_id in offered)]

    async def get(self, provider_id: str) -> Provider:
        if provider_id == SCRIPTED_PROVIDER_ID:
            return _scripted(_workspace_born(self._core.workspace_id))
        if provider_id in KEYED_PROVIDERS:
            if not await self._offered([provider_id]):
                raise NotFound(f"no model provider {provider_id}")
            return _keyed(provider_id, _workspace_born(self._core.workspace_id))
        with translate_redis_errors():
            record = await self._core.redis.hgetall(self._core.keys.provider(provider_id))
        if not record:
            raise NotFound(f"no model provider {provider_id}")
        return _byok(record)

    async def page(
        self, *, limit: int, after: str | None, ascending: bool, extensions: bool = True
    ) -> tuple[list[Provider], str | None]:
        """A page of providers, the platform's and the workspace's; without `extensions`, those of a format
        the Subako enum does not name are left out (the cursor still counts them)."""
        items, cursor = await self._page(limit=limit, after=after, ascending=ascending)
        return [p for p in items if extensions or p.format in SUBAKO_FORMATS], cursor

    async def _page(self, *, limit: int, after: str | None, ascending: bool) -> tuple[list[Provider], str | None]:
        platform = await self._platform()
        # Every platform id, offered now or not: a cursor the last page ended on stays one.
        platform_ids = _PLATFORM_IDS
        # A cursor inside the platform block means the workspace block is behind (desc) or ahead (asc).
        byok_after = None if after in platform_ids else after
        skip_byok = after in platform_ids and not ascending
        byok: list[Provider] = []
        if not skip_byok:
            index = self._core.keys.providers
            page = await id_page(self._core.redis, index, limit=limit + 1, after=byok_after, ascending=ascending)
            byok = await self._records(page.ids)
        if ascending:
            head = [p for p in platform if after is None or (after in platform_ids and p.id > after)]
            merged = head + byok
        else:
            tail = [p for p in reversed(platform) if after is None or after not in platform_ids or p.id < after]
            merged = byok + tail
        items = merged[:limit]
        return items, items[-1].id if len(merged) > limit else None

    async def create(
        self,
        provider_id: str,
        *,
        format: ProviderFormat,
        display_name: str,
        description: str,
        base_url: str,
        api_key: str,
        text_only: bool = False,
        cloud: dict[str, str] | None = None,
        credentials: Credentials = None,
    ) -> Provider:
        self._check_cloud(format, base_url, cloud, credentials)
        await self.addresses.check_base_url(base_url)
        keys = self._core.keys
        record: aio.Fields = {
            "id": provider_id,
            "format": format,
            "display_name": display_name,
            "description": description,
            "base_url": base_url,
            "api_key": api_key,
            "text_only": "1" if text_only else "",
            "cloud": encode_cloud(cloud),
            "credentials": encode_credentials(credentials),
            "created_at": now_ms(),
        }
        # Record first, index after (written again by a retry): see Agents.create.
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                if not await self._core.redis.exists(keys.provider(provider_id)):
                    pipe.hset(keys.provider(provider_id), mapping=record)
                pipe.zadd(keys.providers, {provider_id: 0})
                await pipe.execute()
        return await self.get(provider_id)

    async def update(
        self,
        provider_id: str,
        changes: dict[str, str],
        *,
        cloud: dict[str, str] | None = None,
        credentials: Credentials = None,
    ) -> Provider:
        """Apply `changes` (record fields as text) and a new `cloud` or `credentials` (None: kept as they
        are). A new base_url needs the secrets for it: a stored secret goes only to the address it was
        stored for."""
        provider = await self.get(provider_id)
        if provider.type == "platform":
            raise Conflict(f"model provider {provider_id} is a platform provider; only workspace providers change")
        if cloud is not None:
            changes = {**changes, "cloud": encode_cloud(cloud)}
        if credentials is not None:
            changes = {**changes, "credentials": encode_credentials(credentials)}
        moved = changes.get("base_url", provider.base_url) != provider.base_url
        changes = _written(provider, changes, moved)
        if moved or cloud is not None or credentials is not None:
            # What the provider will be, checked whole (a rename alone leaves a stored choice as it was).
            self._check_cloud(
                provider.format,
                changes.get("base_url", provider.base_url),
                cloud if cloud is not None else provider.cloud,
                credentials if credentials is not None else provider.credentials,
            )
        if moved:
            await self.addresses.check_base_url(changes["base_url"])
        if changes:
            # One HSET: a reader sees the old address with the old key or the new with the new, never a mix.
            fields: aio.Fields = dict(changes.items())
            with translate_redis_errors():
                await self._core.redis.hset(self._core.keys.provider(provider_id), mapping=fields)
        return await self.get(provider_id)

    @property
    def _environment_allowed(self) -> bool:
        return self._core.settings.cloud_environment_credentials

    def _check_cloud(
        self, provider_format: str, base_url: str, cloud: dict[str, str] | None, credentials: Credentials
    ) -> None:
        if cloud is None:
            if credentials is not None:
                raise InvalidRequest("credentials: only a provider with a cloud takes credentials; set cloud too")
            return
        check_format(provider_format, cloud)
        check_credentials(cloud, credentials, environment_allowed=self._environment_allowed)
        if credentials == ENVIRONMENT:
            check_environment_base_url(cloud, base_url)

    async def delete(self, provider_id: str) -> None:
        provider = await self.get(provider_id)
        if provider.type == "platform":
            raise Conflict(f"model provider {provider_id} is a platform provider; only workspace providers go")
        keys = self._core.keys
        with translate_redis_errors():
            # The record first: an index entry without one is skipped by every reader.
            async with self._core.redis.pipeline() as pipe:
                pipe.unlink(keys.provider(provider_id))
                pipe.zrem(keys.providers, provider_id)
                await pipe.execute()

    async def _records(self, ids: list[str]) -> list[Provider]:
        found = await records(self._core.redis, [self._core.keys.provider(provider_id) for provider_id in ids])
        return [_byok(r) for r in found if r]


def _written(provider: Provider, changes: dict[str, str], moved: bool) -> dict[str, str]:
    """The fields an update of `provider` writes: refused (InvalidRequest) when it moves the provider
    without the secrets for the new address."""
    secrets = {name for name in ("api_key", "credentials", "cloud") if name in changes}
    if moved and "api_key" not in secrets:
        # The stored key was given for the stored address: sent to a new one it could reach anybody.
        raise InvalidRequest(
            "base_url: a provider's key goes only to the address it was stored for; send api_key (the key"
            " for the new address) with the new base_url, or create a new provider"
        )
    if moved and isinstance(provider.credentials, dict) and "credentials" not in secrets:
        raise InvalidRequest(
            "base_url: a provider's credentials go only to the address they were stored for; send"
            " credentials (and api_key) with the new base_url, or create a new provider"
        )
    if secrets:
        # Secrets are written with the address they are for, with each other and with the cloud they
        # were checked against, in one HSET: a change read before a move made meanwhile would otherwise
        # pair its secret with the moved address. Put back over such a move, the address keeps its own
        # secrets (last writer wins, never a mix of two checked sets).
        stored = {
            "base_url": provider.base_url,
            "api_key": provider.api_key,
            "credentials": encode_credentials(provider.credentials),
            "cloud": encode_cloud(provider.cloud),
        }
        return {**stored, **changes}
    if not moved:
        # Written again without its key it could put back the old address over a move, under the new key.
        return {name: value for name, value in changes.items() if name != "base_url"}
    return changes


def _byok(record: dict[bytes, bytes]) -> Provider:
    text = {k.decode(): v.decode() for k, v in record.items()}
    fmt: ProviderFormat = next((f for f in PROVIDER_FORMATS if f == text["format"]), "openai_responses")
    return Provider(
        id=text["id"],
        type="byok",
        format=fmt,
        display_name=text["display_name"],
        description=text["description"],
        created_at=int(text["created_at"]),
        base_url=text["base_url"],
        api_key=text["api_key"],
        text_only=text.get("text_only") == "1",
        cloud=decode_cloud(text.get("cloud", "")),
        credentials=decode_credentials(text.get("credentials", "")),
    )
