"""Webhooks end to end: a real receiver gets signed deliveries (verified by the `standardwebhooks`
package), retried on 5xx and 429, failed at once on another 4xx, an endpoint disabled by 410; manual
retries keep the id; a slow endpoint delays no other; bad input is refused naming the field."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from standardwebhooks import Webhook

from switchboard.settings import Settings
from tests.api_client import Api, run_over
from tests.helpers import HIGHLIGHT
from tests.webhook_receiver import Answer, Receiver, receiving

pytestmark = pytest.mark.both_redis


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # The receiver listens on 127.0.0.1; retries come fast enough to watch.
    fast = {"provider_allow_private": True, "webhook_retry_schedule_s": "0.2,0.2", "webhook_timeout_s": 2.0}
    return settings.model_copy(update=fast)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with receiving() as running:
        yield running


async def endpoint(api: Api, url: str, events: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    answer = await api.key.post("/v1/webhooks", json={"url": url, "events": events or ["run.completed"], **extra})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def deliveries(api: Api, endpoint_id: str) -> list[dict[str, Any]]:
    answer = await api.key.get(f"/v1/webhooks/{endpoint_id}/deliveries")
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


async def settled(api: Api, endpoint_id: str, status: str, timeout: float = 10.0) -> dict[str, Any]:
    """The endpoint's newest delivery, once it has `status`."""
    until = time.monotonic() + timeout
    while True:
        found = await deliveries(api, endpoint_id)
        if found and found[0]["status"] == status:
            return found[0]
        assert time.monotonic() < until, found
        await asyncio.sleep(0.05)


async def run_once(api: Api, text: str = "hello") -> str:
    session = await api.session()
    await api.send(session, text)
    await api.wait_for(session, run_over)
    return session.id


async def test_a_signed_delivery_reaches_the_receiver(api: Api, receiver: Receiver) -> None:
    created = await endpoint(api, receiver.url("/hook"), ["run.completed", "run.failed"], description="ops")
    assert created["secret"].startswith("whsec_")
    assert created["enabled"] is True
    assert "secret" not in (await api.key.get(f"/v1/webhooks/{created['id']}")).json()
    session_id = await run_once(api)
    (got,) = await receiver.wait("/hook")
    payload = Webhook(created["secret"]).verify(got.body, got.headers)
    assert payload["type"] == "run.completed"
    data = payload["data"]
    assert data["session_id"] == session_id
    assert data["subject"] is None
    assert data["event"]["type"] == "run_completed"
    assert data["run_id"] == data["event"]["run_id"]
    assert payload["timestamp"] == data["event"]["created_at"]
    assert got.headers["webhook-id"].startswith("msg_")
    delivery = await settled(api, created["id"], "succeeded")
    assert delivery["id"] == got.headers["webhook-id"]
    assert (delivery["attempts"], delivery["last_status_code"], delivery["next_attempt_at"]) == (1, 200, None)
    listing = (await api.key.get("/v1/webhooks")).json()
    assert [e["id"] for e in listing["items"]] == [created["id"]]
    assert listing["next_cursor"] is None


async def test_a_500_is_retried_with_the_same_id(api: Api, receiver: Receiver) -> None:
    receiver.answers["/flaky"] = [Answer(500), Answer(200)]
    created = await endpoint(api, receiver.url("/flaky"))
    await run_once(api)
    first, second = await receiver.wait("/flaky", 2)
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    Webhook(created["secret"]).verify(second.body, second.headers)
    delivery = await settled(api, created["id"], "succeeded")
    assert (delivery["attempts"], delivery["last_status_code"]) == (2, 200)


async def test_a_429_waits_for_its_retry_after(api: Api, receiver: Receiver) -> None:
    receiver.answers["/busy"] = [Answer(429, {"retry-after": "1"}), Answer(200)]
    created = await endpoint(api, receiver.url("/busy"))
    await run_once(api)
    first, second = await receiver.wait("/busy", 2)
    assert second.at - first.at >= 0.9
    assert (await settled(api, created["id"], "succeeded"))["attempts"] == 2


async def test_retries_end_in_failed_after_the_schedule(api: Api, receiver: Receiver) -> None:
    receiver.answers["/down"] = [Answer(503)]
    created = await endpoint(api, receiver.url("/down"))
    await run_once(api)
    delivery = await settled(api, created["id"], "failed")
    # Two waits in the schedule: three attempts.
    assert (delivery["attempts"], delivery["last_status_code"]) == (3, 503)
    assert "gave up after 3 attempts" in delivery["last_error"]


async def test_a_404_fails_at_once_and_a_manual_retry_keeps_the_id(api: Api, receiver: Receiver) -> None:
    receiver.answers["/gone-path"] = [Answer(404), Answer(200)]
    created = await endpoint(api, receiver.url("/gone-path"))
    await run_once(api)
    failed = await settled(api, created["id"], "failed")
    assert (failed["attempts"], failed["last_status_code"]) == (1, 404)
    retried = await api.key.post(f"/v1/webhooks/{created['id']}/deliveries/{failed['id']}/retry")
    assert retried.status_code == 202, retried.text
    assert retried.json()["status"] == "pending"
    first, second = await receiver.wait("/gone-path", 2)
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == failed["id"]
    assert (await settled(api, created["id"], "succeeded"))["attempts"] == 2
    missing = await api.key.post(f"/v1/webhooks/{created['id']}/deliveries/msg_{'0' * 32}/retry")
    assert missing.status_code == 404


async def test_a_410_disables_the_endpoint_until_patched(api: Api, receiver: Receiver) -> None:
    receiver.answers["/leaving"] = [Answer(410), Answer(200)]
    created = await endpoint(api, receiver.url("/leaving"))
    await run_once(api)
    assert (await settled(api, created["id"], "failed"))["last_status_code"] == 410
    off = (await api.key.get(f"/v1/webhooks/{created['id']}")).json()
    assert off["enabled"] is False
    assert "410" in off["disabled_reason"]
    # Disabled, it is sent nothing.
    await run_once(api)
    assert len(await deliveries(api, created["id"])) == 1
    on = await api.key.patch(f"/v1/webhooks/{created['id']}", json={"enabled": True})
    assert on.status_code == 200
    assert on.json()["enabled"] is True
    assert on.json()["disabled_reason"] is None
    await run_once(api)
    await receiver.wait("/leaving", 2)


async def test_the_test_event_and_rotate_secret(api: Api, receiver: Receiver) -> None:
    created = await endpoint(api, receiver.url("/t"))
    rotated = await api.key.post(f"/v1/webhooks/{created['id']}/rotate-secret")
    assert rotated.status_code == 200
    secret = rotated.json()["secret"]
    assert secret != created["secret"]
    assert secret.startswith("whsec_")
    sent = await api.key.post(f"/v1/webhooks/{created['id']}/test")
    assert sent.status_code == 202
    assert sent.json()["type"] == "webhook.test"
    (got,) = await receiver.wait("/t")
    assert Webhook(secret).verify(got.body, got.headers)["type"] == "webhook.test"
    with pytest.raises(Exception, match="signature"):
        Webhook(created["secret"]).verify(got.body, got.headers)


async def test_filters_by_subject_and_agent(api: Api, receiver: Receiver) -> None:
    mine = await api.agent("mine")
    await endpoint(api, receiver.url("/agent"), agent_id=mine)
    await endpoint(api, receiver.url("/subject"), subject="user-7")
    await endpoint(api, receiver.url("/all"))
    session = await api.session(mine)
    await api.send(session, "hi")
    await api.wait_for(session, run_over)
    await run_once(api)
    await receiver.wait("/all", 2)
    (got,) = await receiver.wait("/agent")
    assert json.loads(got.body)["data"]["session_id"] == session.id
    await asyncio.sleep(0.3)
    assert len(receiver.received["/agent"]) == 1
    assert receiver.received["/subject"] == []


async def test_a_slow_endpoint_delays_no_other(api: Api, receiver: Receiver) -> None:
    receiver.answers["/slow"] = [Answer(200, delay_s=1.5)]
    await endpoint(api, receiver.url("/slow"))
    await endpoint(api, receiver.url("/fast"))
    started = time.monotonic()
    for _ in range(3):
        await run_once(api)
    got = await receiver.wait("/fast", 3)
    assert got[-1].at - started < 1.5 + 3, "the fast endpoint waited for the slow one"
    assert all(r.at < started + 10 for r in got)
    assert len(receiver.received["/slow"]) < 3


async def test_changes_and_delete(api: Api, receiver: Receiver) -> None:
    created = await endpoint(api, receiver.url("/a"), subject="s-1", description="first")
    changed = await api.key.patch(
        f"/v1/webhooks/{created['id']}", json={"url": receiver.url("/b"), "events": ["run.failed"], "subject": None}
    )
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert (body["url"], body["events"], body["subject"], body["description"]) == (
        receiver.url("/b"), ["run.failed"], None, "first"
    )  # fmt: skip
    await run_once(api, "/fail boom")
    (got,) = await receiver.wait("/b")
    assert json.loads(got.body)["type"] == "run.failed"
    assert (await api.key.delete(f"/v1/webhooks/{created['id']}")).status_code == 204
    assert (await api.key.get(f"/v1/webhooks/{created['id']}")).status_code == 404
    assert (await api.key.get(f"/v1/webhooks/{created['id']}/deliveries")).status_code == 404
    assert (await api.key.delete(f"/v1/webhooks/{created['id']}")).status_code == 404


async def test_an_approval_reaches_its_webhook_and_the_inbox(api: Api, receiver: Receiver) -> None:
    """The notices' consumers in turn: the webhook gets `approval.requested` with the call's run, and the
    workspace inbox opens the approval's item, then closes it on the decision (approval_resolved)."""
    created = await endpoint(api, receiver.url("/approvals"), ["approval.requested"])
    gated: dict[str, Any] = {"client__web__highlight_row": "require_approval"}
    session = await api.session(client_tool_policies=gated)
    await api.register(session)
    await api.send(session, '/call client__web__highlight_row {"row_id": "7"}')
    (got,) = await receiver.wait("/approvals")
    payload = Webhook(created["secret"]).verify(got.body, got.headers)
    assert payload["type"] == "approval.requested"
    call_id = payload["data"]["event"]["call_id"]
    run_id = next(e["run_id"] for e in await api.events(session) if e["type"] == "run_started")
    assert payload["data"]["run_id"] == run_id

    async def inbox_calls() -> list[str]:
        answer = await api.key.get("/v1/inbox")
        assert answer.status_code == 200, answer.text
        return [item["call_id"] for item in answer.json()["items"] if item["session_id"] == session.id]

    until = time.monotonic() + 10
    while await inbox_calls() != [call_id]:
        assert time.monotonic() < until
        await asyncio.sleep(0.05)
    async with api.as_session(session) as client:
        decided = await client.post(f"/v1/sessions/{session.id}/approvals/{call_id}", json={"decision": "deny"})
        assert decided.status_code == 200, decided.text
    while await inbox_calls():
        assert time.monotonic() < until + 10
        await asyncio.sleep(0.05)


async def test_a_call_waiting_for_its_client_reaches_its_webhook_and_the_inbox(api: Api, receiver: Receiver) -> None:
    """`client_tool_waiting` is notable (`call.waiting`); the redispatch of a call that waited leaves a
    notice of its own, which closes the inbox's item."""
    created = await endpoint(api, receiver.url("/waiting"), ["call.waiting"])
    session = await api.session()
    web = await api.register(session, tools=[{**HIGHLIGHT, "on_leave": "wait"}])
    await api.send(session, '/call client__web__highlight_row {"row_id": "7"}')
    await api.wait_for(session, lambda es: any(e["type"] == "client_tool_dispatched" for e in es))
    async with api.as_session(session) as client:
        left = await client.delete(f"/v1/sessions/{session.id}/clients/{web['id']}")
        assert left.status_code == 204, left.text
    (got,) = await receiver.wait("/waiting")
    payload = Webhook(created["secret"]).verify(got.body, got.headers)
    assert payload["type"] == "call.waiting"
    event = payload["data"]["event"]
    assert event["type"] == "client_tool_waiting"
    assert payload["data"]["run_id"] is not None

    async def inbox_calls() -> list[str]:
        answer = await api.key.get("/v1/inbox", params={"kind": "call"})
        assert answer.status_code == 200, answer.text
        return [item["call_id"] for item in answer.json()["items"] if item["session_id"] == session.id]

    until = time.monotonic() + 10
    while await inbox_calls() != [event["call_id"]]:
        assert time.monotonic() < until
        await asyncio.sleep(0.05)
    await api.register(session, tools=[{**HIGHLIGHT, "on_leave": "wait"}])
    while await inbox_calls():
        assert time.monotonic() < until + 10
        await asyncio.sleep(0.05)
