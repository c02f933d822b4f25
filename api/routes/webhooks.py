"""Webhook endpoints (issue 37): Switchboard POSTs a workspace's notable session events (an approval
requested, a run completed, failed or cancelled, ...) to them, signed as Standard Webhooks says. An API key
with `session.manage` manages them: they carry session events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from api.deps import Authenticated, Page, canonical_id
from api.keyed import Answer, Keyed, keyed
from api.schemas.common import DEFAULT_LIMIT, MAX_LIMIT, ErrorBody, moment, optional_moment
from api.schemas.webhooks import (
    CreateWebhookBody,
    DeliveryBody,
    DeliveryPage,
    UpdateWebhookBody,
    WebhookBody,
    WebhookPage,
    WebhookWithSecretBody,
)
from api.state import State
from broker.errors import NotFound
from broker.services.credentials import Permission
from broker.services.deliveries import Delivery
from broker.services.webhooks import WebhookEndpoint
from common.codec import uuid7
from common.webhooks import TEST_TYPE
from common.webhooks import body as webhook_body

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], responses={400: {"model": ErrorBody}})

_DELIVERY_ID = "^msg_[0-9a-f]{32}$"


def _endpoint(record: WebhookEndpoint) -> dict[str, object]:
    return {
        "id": record.id,
        "url": record.url,
        "events": list(record.events),
        "subject": record.subject,
        "agent_id": record.agent_id,
        "description": record.description,
        "enabled": record.enabled,
        "disabled_reason": record.disabled_reason,
        "created_at": moment(record.created_at),
    }


def _with_secret(record: WebhookEndpoint) -> WebhookWithSecretBody:
    return WebhookWithSecretBody.model_validate({**_endpoint(record), "secret": record.secret})


def _delivery(record: Delivery) -> DeliveryBody:
    return DeliveryBody.model_validate(
        {
            "id": record.id,
            "type": record.type,
            "status": record.status,
            "attempts": record.attempts,
            "last_status_code": record.last_status_code,
            "last_error": record.last_error,
            "next_attempt_at": optional_moment(record.next_attempt_at),
            "created_at": moment(record.created_at),
        }
    )


@router.post("", status_code=201, response_model=WebhookWithSecretBody)
async def create_webhook(body: CreateWebhookBody, request: Request, caller: Authenticated, state: State) -> Response:
    """A new endpoint; the answer is the only one (with rotate-secret's) that shows its `secret`. A URL on
    a loopback, private, link-local or metadata address is refused (400) unless the deployment sets
    SWITCHBOARD_PROVIDER_ALLOW_PRIVATE; every attempt checks the address again. At most 100 a workspace."""
    caller.require(Permission.SESSION_MANAGE)

    async def act(keyed_: Keyed) -> Answer:
        record = await state.broker.webhooks.create(
            keyed_.seed["webhook_id"],
            url=body.url,
            events=body.events,
            subject=body.subject,
            agent_id=str(body.agent_id) if body.agent_id is not None else None,
            description=body.description,
        )
        return Answer(201, _with_secret(record).model_dump_json().encode())

    return await keyed(request, caller, act, seed={"webhook_id": uuid7()})


@router.get("", response_model=WebhookPage)
async def list_webhooks(caller: Authenticated, state: State, page: Page) -> WebhookPage:
    caller.require(Permission.SESSION_MANAGE)
    found, cursor = await state.broker.webhooks.page(limit=page.limit, after=page.after, ascending=page.ascending)
    return WebhookPage.model_validate({"items": [_endpoint(r) for r in found], "next_cursor": cursor})


@router.get("/{webhook_id}", response_model=WebhookBody)
async def get_webhook(webhook_id: str, caller: Authenticated, state: State) -> WebhookBody:
    caller.require(Permission.SESSION_MANAGE)
    record = await state.broker.webhooks.get(canonical_id(webhook_id, "webhook endpoint"))
    return WebhookBody.model_validate(_endpoint(record))


@router.patch("/{webhook_id}", response_model=WebhookBody)
async def update_webhook(webhook_id: str, body: UpdateWebhookBody, caller: Authenticated, state: State) -> WebhookBody:
    """Change what is given; `subject`, `agent_id` or `description` given as null is cleared. `"enabled":
    true` turns an endpoint a 410 (or a PATCH) turned off back on, and its pending deliveries go out."""
    caller.require(Permission.SESSION_MANAGE)
    given = body.model_fields_set
    changes: dict[str, str] = {}
    if body.url is not None:
        changes["url"] = body.url
    for name in ("subject", "agent_id", "description"):
        if name in given:
            value = getattr(body, name)
            changes[name] = "" if value is None else str(value)
    record = await state.broker.webhooks.update(
        canonical_id(webhook_id, "webhook endpoint"), changes, events=body.events, enabled=body.enabled
    )
    return WebhookBody.model_validate(_endpoint(record))


@router.delete("/{webhook_id}", status_code=204)
async def delete_webhook(webhook_id: str, caller: Authenticated, state: State) -> Response:
    """The endpoint, its deliveries (pending ones included) and its subscriptions."""
    caller.require(Permission.SESSION_MANAGE)
    await state.broker.webhooks.delete(canonical_id(webhook_id, "webhook endpoint"))
    return Response(status_code=204)


@router.post("/{webhook_id}/rotate-secret", response_model=WebhookWithSecretBody)
async def rotate_secret(webhook_id: str, caller: Authenticated, state: State) -> WebhookWithSecretBody:
    """A new signing secret, shown in this answer only; attempts from now on are signed with it."""
    caller.require(Permission.SESSION_MANAGE)
    record = await state.broker.webhooks.rotate_secret(canonical_id(webhook_id, "webhook endpoint"))
    return _with_secret(record)


@router.post("/{webhook_id}/test", status_code=202, response_model=DeliveryBody)
async def test_webhook(webhook_id: str, caller: Authenticated, state: State) -> DeliveryBody:
    """Send the endpoint a `webhook.test` event (whatever events it takes); the answer is its delivery."""
    caller.require(Permission.SESSION_MANAGE)
    broker = state.broker
    endpoint_id = canonical_id(webhook_id, "webhook endpoint")
    record = await broker.webhooks.get(endpoint_id)
    delivery_id = "msg_" + uuid7().replace("-", "")
    timestamp = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    sent = webhook_body(TEST_TYPE, timestamp, None, None, None, None)
    await broker.deliveries.enqueue_test(record.id, delivery_id, sent)
    return _delivery(await broker.deliveries.get(endpoint_id, delivery_id))


@router.get("/{webhook_id}/deliveries", response_model=DeliveryPage)
async def list_deliveries(
    webhook_id: str,
    caller: Authenticated,
    state: State,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    after: Annotated[
        str | None, Query(description="The id of the last delivery of the previous page", pattern=_DELIVERY_ID)
    ] = None,
) -> DeliveryPage:
    """The endpoint's deliveries, newest first (the log keeps the newest SWITCHBOARD_WEBHOOK_LOG_SIZE)."""
    caller.require(Permission.SESSION_MANAGE)
    found, cursor = await state.broker.deliveries.page(
        canonical_id(webhook_id, "webhook endpoint"), limit=limit, after=after
    )
    return DeliveryPage.model_validate({"items": [_delivery(d) for d in found], "next_cursor": cursor})


@router.post("/{webhook_id}/deliveries/{delivery_id}/retry", status_code=202, response_model=DeliveryBody)
async def retry_delivery(webhook_id: str, delivery_id: str, caller: Authenticated, state: State) -> DeliveryBody:
    """Send a delivery again now, with the same `webhook-id`; its retry schedule starts afresh."""
    caller.require(Permission.SESSION_MANAGE)
    endpoint_id = canonical_id(webhook_id, "webhook endpoint")
    if len(delivery_id) > 64:
        raise NotFound(f"no delivery {delivery_id[:64]}... of this webhook endpoint")
    return _delivery(await state.broker.deliveries.retry(endpoint_id, delivery_id))
