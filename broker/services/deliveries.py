"""Webhook deliveries: written when a notable event's notice is handled (one per endpoint it concerns,
its id derived from the endpoint, session and seq so writing it twice writes it once), taken by the
workers' senders under a lease, and their attempts' outcomes recorded. Every script runs in the
workspace's slot; an endpoint's keys are broker/keys.py WebhookKeys."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.services.webhooks import named_keys
from common.webhooks import TEST_TYPE

AttemptOutcome = Literal["succeeded", "retry", "failed", "gone"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """A delivery as listed: `next_attempt_at` and `created_at` in ms."""

    id: str
    type: str
    status: Literal["pending", "succeeded", "failed"]
    attempts: int
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: int | None
    created_at: int


@dataclass(frozen=True, slots=True)
class Taken:
    """A delivery a sender holds for one attempt: what it sends and where."""

    endpoint_id: str
    url: str
    secret: str
    delivery_id: str
    attempt: int
    # Attempts since the delivery was made or last retried by hand: its place on the retry schedule.
    tries: int
    type: str
    body: bytes


def _delivery(raw: Any) -> Delivery:
    rec = json.loads(raw)
    return Delivery(
        id=rec["id"],
        type=rec["type"],
        status=rec["status"],
        attempts=int(rec["attempts"]),
        last_status_code=rec.get("last_status_code"),
        last_error=rec.get("last_error"),
        next_attempt_at=rec.get("next_attempt_at"),
        created_at=int(rec["created_at"]),
    )


def _taken(reply: list[Any]) -> list[Taken]:
    """Deliveries a script took, 8 fields each (lib/webhooks.lua SBW.take)."""
    taken = []
    for i in range(0, len(reply), 8):
        endpoint_id, url, secret, delivery_id, attempt, tries, kind, body = reply[i : i + 8]
        raw = body.encode() if isinstance(body, str) else bytes(body)
        taken.append(
            Taken(str(endpoint_id), str(url), str(secret), str(delivery_id), int(attempt), int(tries), str(kind), raw)
        )
    return taken


class Deliveries:
    def __init__(self, core: Core) -> None:
        self._core = core

    def _cap(self) -> int:
        return self._core.settings.webhook_endpoint_concurrency

    def _endpoint_keys(self, endpoint_ids: list[str]) -> list[str]:
        return [key for endpoint_id in endpoint_ids for key in self._core.keys.webhook(endpoint_id).block]

    async def enqueue(
        self,
        endpoint_ids: list[str],
        *,
        kind: str,
        session_id: str,
        seq: int,
        subject: str | None,
        agent_id: str,
        body: str,
        most: int = 0,
        lease_ms: int = 0,
    ) -> tuple[int, list[Taken]]:
        """Write a notable event's deliveries for those of `endpoint_ids` it concerns: how many were written
        now (none for one written before), and up to `most` of them taken for the caller to send at once
        (each held `lease_ms`, as `take` holds them)."""
        if not endpoint_ids:
            return 0, []
        return await self._enqueue(
            endpoint_ids, kind, session_id, str(seq), subject or "", agent_id, body, "", most, lease_ms
        )

    async def enqueue_test(self, endpoint_id: str, delivery_id: str, body: str) -> None:
        await self._enqueue([endpoint_id], TEST_TYPE, "", "", "", "", body, delivery_id, 0, 0)

    async def _enqueue(
        self,
        endpoint_ids: list[str],
        kind: str,
        sid: str,
        seq: str,
        subject: str,
        agent_id: str,
        body: str,
        test_id: str,
        most: int,
        lease_ms: int,
    ) -> tuple[int, list[Taken]]:
        settings = self._core.settings
        reply = await self._core.scripts.run(
            "enqueue_deliveries",
            {"schedule": self._core.keys.webhooks_due, "endpoints": self._endpoint_keys(endpoint_ids)},
            {
                "kind": kind,
                "sid": sid,
                "seq": seq,
                "subject": subject,
                "agent_id": agent_id,
                "body": body,
                "keep": settings.webhook_log_size,
                "cap": settings.webhook_endpoint_concurrency,
                "test_id": test_id,
                "most": most,
                "lease_ms": lease_ms,
            },
        )
        return int(reply[0]), _taken(reply[1:])

    async def due(self, most: int) -> list[str]:
        """The endpoints with a delivery to send now, earliest first."""
        reply = await self._core.scripts.run("due_webhooks", {"schedule": self._core.keys.webhooks_due}, {"most": most})
        return [str(endpoint_id) for endpoint_id in reply[1:]]

    async def take(self, endpoint_ids: list[str], *, most: int, lease_ms: int) -> list[Taken]:
        """Up to `most` due deliveries of these endpoints, each held for `lease_ms`."""
        if not endpoint_ids or most <= 0:
            return []
        reply = await self._core.scripts.run(
            "take_deliveries",
            {"schedule": self._core.keys.webhooks_due, "endpoints": self._endpoint_keys(endpoint_ids)},
            {"cap": self._cap(), "lease_ms": lease_ms, "most": most},
        )
        return _taken(reply)

    async def record(
        self,
        taken: Taken,
        outcome: AttemptOutcome,
        *,
        status_code: int | None = None,
        error: str = "",
        delay_ms: int = 0,
        reason: str = "",
    ) -> str | None:
        """How an attempt ended; the delivery's status now, or None when the attempt was not its latest."""
        keys = self._core.keys
        reply = await self._core.scripts.run(
            "record_delivery",
            {"schedule": keys.webhooks_due, **named_keys(keys.webhook(taken.endpoint_id).block)},
            {
                "id": taken.endpoint_id,
                "delivery": taken.delivery_id,
                "attempt": taken.attempt,
                "outcome": outcome,
                "status_code": "" if status_code is None else str(status_code),
                "error": error[:500],
                "delay_ms": delay_ms,
                "reason": reason,
                "cap": self._cap(),
            },
        )
        return str(reply[0]) if reply else None

    async def retry(self, endpoint_id: str, delivery_id: str) -> Delivery:
        """Send a delivery again at once, with the same id and a fresh retry schedule."""
        keys = self._core.keys
        reply = await self._core.scripts.run(
            "retry_delivery",
            {"schedule": keys.webhooks_due, **named_keys(keys.webhook(endpoint_id).block)},
            {"id": endpoint_id, "delivery": delivery_id, "cap": self._cap()},
        )
        return _delivery(reply[0])

    async def get(self, endpoint_id: str, delivery_id: str) -> Delivery:
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._core.keys.webhook(endpoint_id).deliveries, delivery_id)
        if raw is None:
            raise NotFound(f"no delivery {delivery_id} of this webhook endpoint")
        return _delivery(raw)

    async def page(self, endpoint_id: str, *, limit: int, after: str | None) -> tuple[list[Delivery], str | None]:
        """One page of the endpoint's deliveries, newest first; `after` a delivery id of the page before."""
        keys = self._core.keys.webhook(endpoint_id)
        with translate_redis_errors():
            if not await self._core.redis.exists(keys.endpoint):
                raise NotFound(f"no webhook endpoint {endpoint_id}")
            start = 0
            if after is not None:
                rank = await self._core.redis.zrevrank(keys.log, after)
                if rank is None:
                    raise NotFound(f"no delivery {after} of this webhook endpoint to page after")
                start = rank + 1
            ids = [i.decode() for i in await self._core.redis.zrevrange(keys.log, start, start + limit)]
            found = await self._core.redis.hmget(keys.deliveries, ids[:limit]) if ids else []
        items = [_delivery(raw) for raw in found if raw is not None]
        return items, (ids[limit - 1] if len(ids) > limit else None)
