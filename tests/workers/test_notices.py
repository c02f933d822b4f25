"""Notices and webhook delivery in the workers: a notice whose worker died (took it, or even wrote its
deliveries, and never finished) is handed to a live worker and its delivery still arrives, once; the
workers' /metrics count attempts by outcome."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest
from standardwebhooks import Webhook

from broker import Broker
from common.codec import loads
from switchboard.settings import Settings
from tests.helpers import Exposition, commit, make_session, start_run, work_entries
from tests.stack import run_worker
from tests.webhook_receiver import Answer, receiving
from workers.metrics import WorkerMetrics
from workers.notices import Notices
from workers.webhooks import WebhookConsumer, WebhookSender

pytestmark = pytest.mark.both_redis


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"provider_allow_private": True, "webhook_retry_schedule_s": "0.2"})


async def completed_run(broker: Broker) -> tuple[str, str]:
    """A session whose run completed with no worker about: its notice waits on the work stream."""
    session_id = await make_session(broker)
    run_id = await start_run(broker, session_id)
    await commit(broker, session_id, run_id, [])
    return session_id, run_id


async def notices_of(broker: Broker, session_id: str) -> list[str]:
    return [member for _, member in await work_entries(broker, session_id) if member.startswith("n|")]


@pytest.mark.parametrize("wrote_deliveries", [False, True], ids=["died-after-taking", "died-after-writing"])
async def test_a_notice_whose_worker_died_is_still_delivered_once(
    broker: Broker[Settings], settings: Settings, redis_url: str, wrote_deliveries: bool
) -> None:
    async with receiving() as receiver:
        endpoint = await broker.webhooks.create(
            "01a22b9d-0000-7000-8000-00000000e001",
            url=receiver.url("/in"), events=["run.completed"], subject=None, agent_id=None, description=None,
        )  # fmt: skip
        session_id, run_id = await completed_run(broker)
        (notice,) = await notices_of(broker, session_id)
        assert notice.startswith(f"n|{session_id}|")
        # A worker takes the notice and dies (SIGKILL: nothing after this line of its runs) before it is done.
        partition = broker.core.keys.session(session_id).partition
        taken = [e for e in await broker.work.take(partition.number, "dead-worker", 10) if e.kind == "n"]
        assert [e.session_id for e in taken] == [session_id]
        if wrote_deliveries:
            # ... or after its consumer wrote the deliveries, before the entry was done.
            read = await Notices(broker).read(session_id, int(taken[0].detail[0]))
            assert read is not None
            dying = WebhookSender(broker, broker.providers.addresses, WorkerMetrics())
            # A stopped sender takes nothing: the deliveries are written, and left for the live worker.
            await dying.stop(0)
            await WebhookConsumer(broker, dying)(read)
        async with run_worker(settings, redis_url):
            # Its claim (a lease, 1 s here) lapses, and a live worker hands the notice over again.
            (got,) = await receiver.wait("/in")
            async with asyncio.timeout(5):
                while await notices_of(broker, session_id):
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
        assert len(receiver.received["/in"]) == 1
        payload = Webhook(endpoint.secret).verify(got.body, got.headers)
        assert payload["data"]["run_id"] == run_id
        assert payload["data"]["session_id"] == session_id
        assert await notices_of(broker, session_id) == []
        found, _ = await broker.deliveries.page(endpoint.id, limit=10, after=None)
        assert [(d.status, d.attempts) for d in found] == [("succeeded", 1)]


async def test_a_notice_of_a_deleted_session_is_done_with(broker: Broker, settings: Settings, redis_url: str) -> None:
    session_id, _ = await completed_run(broker)
    await broker.sessions.delete(session_id)
    async with run_worker(settings, redis_url):
        async with asyncio.timeout(5):
            while await notices_of(broker, session_id):
                await asyncio.sleep(0.05)


async def test_attempts_are_counted_by_outcome(broker: Broker[Settings]) -> None:
    metrics = WorkerMetrics()
    sender = WebhookSender(broker, broker.providers.addresses, metrics)
    async with receiving() as receiver:
        receiver.answers["/no"] = [Answer(404)]
        receiver.answers["/later"] = [Answer(503), Answer(200)]
        ids = []
        for n, path in enumerate(("/ok", "/no", "/later")):
            created = await broker.webhooks.create(
                f"01a22b9d-0000-7000-8000-00000000f00{n}",
                url=receiver.url(path), events=["run.failed"], subject=None, agent_id=None, description=None,
            )  # fmt: skip
            ids.append(created.id)
            await broker.deliveries.enqueue_test(created.id, f"msg_{n:032x}", '{"type":"webhook.test"}')
        sender.start()
        try:
            await receiver.wait("/later", 2)
            await receiver.wait("/no")
            await receiver.wait("/ok")
            await asyncio.sleep(0.3)
        finally:
            await sender.stop(1.0)
    read = Exposition(generate_latest(metrics.registry).decode())
    counted = {o: read("switchboard_webhook_attempts_total", outcome=o) for o in ("succeeded", "retry", "failed")}
    assert counted == {"succeeded": 2, "retry": 1, "failed": 1}
    statuses = [(await broker.deliveries.page(i, limit=1, after=None))[0][0].status for i in ids]
    assert statuses == ["succeeded", "failed", "succeeded"]
    assert loads(receiver.received["/ok"][0].body) == {"type": "webhook.test"}
