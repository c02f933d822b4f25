"""Webhooks as the Standard Webhooks specification has them (https://www.standardwebhooks.com): the event
types an endpoint subscribes to, its secret, the signature of a delivery, and a delivery's body."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets

from common.events.catalogue import NOTICES

# The webhook event types, in the order the docs list them. `call.waiting` and `input.requested` come
# from `client_tool_waiting` (a client tool waiting for its client) and `input_requested` (a client asking
# the person during a call).
WEBHOOK_TYPES: tuple[str, ...] = (
    "approval.requested",
    "call.waiting",
    "input.requested",
    "run.completed",
    "run.failed",
    "run.cancelled",
)
# The one type never subscribed to: POST /v1/webhooks/{id}/test sends it to its endpoint alone.
TEST_TYPE = "webhook.test"
SECRET_PREFIX = "whsec_"  # noqa: S105 (the prefix, not a secret)

assert set(NOTICES.values()) <= set(WEBHOOK_TYPES), "a notable event's webhook type is not a webhook type"


def new_secret() -> str:
    """An endpoint's signing secret: `whsec_` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def signature(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header: `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed
    with the secret's bytes."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def headers(secret: str, delivery_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """What a delivery's attempt is sent with."""
    return {
        "content-type": "application/json",
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, delivery_id, timestamp, body),
    }


def body(
    kind: str, timestamp: str, session_id: str | None, run_id: str | None, subject: str | None, event: bytes | None
) -> str:
    """A delivery's body: `{"type", "timestamp", "data": {"session_id", "run_id", "subject", "event"}}`, the
    event spliced in as the log holds it."""
    data = {"session_id": session_id, "run_id": run_id, "subject": subject}
    head = json.dumps({"type": kind, "timestamp": timestamp, "data": data}, separators=(",", ":"))
    # `...}}` -> `...,"event":<event>}}`: the stored text, not a re-encoding of it.
    return head[:-2] + ',"event":' + (event.decode() if event is not None else "null") + "}}"
