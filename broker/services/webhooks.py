"""Webhook endpoints of the workspace: at most `MAX_ENDPOINTS`, each with its URL, the event types it
takes, optional subject and agent filters, and its signing secret (shown only when created and rotated).
Their deliveries are broker/services/deliveries.py's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.services.pages import id_page, records
from common.addresses import ProviderAddresses
from common.webhooks import WEBHOOK_TYPES, new_secret

# The most endpoints a workspace has (the bound: each notable event reads every subscriber).
MAX_ENDPOINTS = 100
_WHAT = "a webhook endpoint"


@dataclass(frozen=True, slots=True)
class WebhookEndpoint:
    id: str
    url: str
    events: tuple[str, ...]
    subject: str | None
    agent_id: str | None
    description: str | None
    enabled: bool
    disabled_reason: str | None
    created_at: int
    secret: str = field(default="", repr=False)


def _text(found: Mapping[bytes, bytes], name: str) -> str | None:
    value = found.get(name.encode(), b"").decode()
    return value or None


def _endpoint(found: Mapping[bytes, bytes]) -> WebhookEndpoint:
    return WebhookEndpoint(
        id=found[b"id"].decode(),
        url=found[b"url"].decode(),
        events=tuple(json.loads(found.get(b"events", b"[]"))),
        subject=_text(found, "subject"),
        agent_id=_text(found, "agent_id"),
        description=_text(found, "description"),
        enabled=found.get(b"enabled") == b"1",
        disabled_reason=_text(found, "disabled_reason"),
        created_at=int(found[b"created_at"]),
        secret=found.get(b"secret", b"").decode(),
    )


class Webhooks:
    def __init__(self, core: Core, addresses: ProviderAddresses) -> None:
        self._core = core
        self._addresses = addresses

    def _types(self) -> list[str]:
        return [self._core.keys.webhooks_for(kind) for kind in WEBHOOK_TYPES]

    async def create(
        self,
        endpoint_id: str,
        *,
        url: str,
        events: list[str],
        subject: str | None,
        agent_id: str | None,
        description: str | None,
    ) -> WebhookEndpoint:
        """A new endpoint with a new secret. A URL whose host is (or resolves to) a loopback, private,
        link-local or metadata address is refused unless SWITCHBOARD_PROVIDER_ALLOW_PRIVATE; every attempt
        checks it again."""
        await self._addresses.check_base_url(url, "url", _WHAT)
        keys = self._core.keys
        fields = {"url": url, "subject": subject or "", "agent_id": agent_id or "", "secret": new_secret()}
        fields["description"] = description or ""
        await self._core.scripts.run(
            "add_webhook",
            {"index": keys.webhooks, "endpoint": keys.webhook(endpoint_id).endpoint, "types": self._types()},
            {
                "id": endpoint_id,
                "fields": json.dumps(fields),
                "names": json.dumps(WEBHOOK_TYPES),
                "events": json.dumps(events),
                "cap": MAX_ENDPOINTS,
            },
        )
        return await self.get(endpoint_id)

    async def get(self, endpoint_id: str) -> WebhookEndpoint:
        with translate_redis_errors():
            found = await self._core.redis.hgetall(self._core.keys.webhook(endpoint_id).endpoint)
        if b"id" not in found:
            raise NotFound(f"no webhook endpoint {endpoint_id}")
        return _endpoint(found)

    async def page(self, *, limit: int, after: str | None, ascending: bool) -> tuple[list[WebhookEndpoint], str | None]:
        keys = self._core.keys
        page = await id_page(self._core.redis, keys.webhooks, limit=limit, after=after, ascending=ascending)
        found = await records(self._core.redis, [keys.webhook(endpoint_id).endpoint for endpoint_id in page.ids])
        return [_endpoint(r) for r in found if b"id" in r], page.next_cursor

    async def update(
        self,
        endpoint_id: str,
        changes: Mapping[str, str],
        *,
        events: list[str] | None = None,
        enabled: bool | None = None,
    ) -> WebhookEndpoint:
        """Set the fields in `changes` (url, subject, agent_id, description, secret; '' clears a filter),
        the types taken, and whether it is enabled (turned on: its disabled reason cleared and its pending
        deliveries sent)."""
        if "url" in changes:
            await self._addresses.check_base_url(changes["url"], "url", _WHAT)
        keys = self._core.keys.webhook(endpoint_id)
        await self._core.scripts.run(
            "change_webhook",
            {"schedule": self._core.keys.webhooks_due, **named_keys(keys.block), "types": self._types()},
            {
                "id": endpoint_id,
                "fields": json.dumps(dict(changes)),
                "names": json.dumps(WEBHOOK_TYPES),
                "events": json.dumps(events) if events is not None else "",
                "enabled": "" if enabled is None else ("1" if enabled else "0"),
                "reason": "disabled by a PATCH request",
                "cap": self._core.settings.webhook_endpoint_concurrency,
            },
        )
        return await self.get(endpoint_id)

    async def rotate_secret(self, endpoint_id: str) -> WebhookEndpoint:
        return await self.update(endpoint_id, {"secret": new_secret()})

    async def delete(self, endpoint_id: str) -> None:
        keys = self._core.keys
        await self._core.scripts.run(
            "remove_webhook",
            {
                "index": keys.webhooks,
                "schedule": keys.webhooks_due,
                **named_keys(keys.webhook(endpoint_id).block),
                "types": self._types(),
            },
            {"id": endpoint_id},
        )

    async def subscribers(self, kind: str) -> list[str]:
        """The ids of the endpoints taking events of `kind` (a plain read: the script writing a delivery
        checks each again)."""
        with translate_redis_errors():
            found = await self._core.redis.smembers(self._core.keys.webhooks_for(kind))
        return [member.decode() for member in found]


def named_keys(block: list[str]) -> dict[str, str]:
    """An endpoint's keys by the names the scripts declare them with (lib/webhooks.lua)."""
    return dict(zip(("endpoint", "log", "deliveries", "due", "sending"), block, strict=True))
