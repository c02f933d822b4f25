"""Webhooks across worker deaths, with real processes: a worker SIGKILLed between an event and its
delivery loses nothing (another worker delivers it, under the same `webhook-id`), at a chosen moment and at
random ones; and a call waiting for its client when its registration lapses while no worker runs."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from standardwebhooks import Webhook

from switchboard.processes import Processes
from tests.api.test_waiting_calls import CALL, WAITING, answer, count, first_call, wait_for
from tests.api_client import ENDS, Api, of_type, run_over
from tests.e2e.served import process_api, process_set
from tests.webhook_receiver import Answer, Receiver, receiving

pytestmark = [pytest.mark.processes, pytest.mark.timeout(180), pytest.mark.both_redis]

FAST_RECOVERY = {
    # A dead worker's partitions, claims and delivery leases pass to a live one within seconds.
    "keeper_lease_s": "1",
    "step_lease_s": "1",
    "server_call_lease_s": "1",
    # A delivery's lease is its attempt's timeout and a margin (workers/webhooks.py): 7 s here.
    "webhook_timeout_s": "2",
    "webhook_retry_schedule_s": "0.2,0.2,0.2",
    # The receiver listens on 127.0.0.1.
    "provider_allow_private": "true",
}


@pytest.fixture
def processes(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    with process_set(redis_url, tmp_path_factory.mktemp("webhook-logs"), **FAST_RECOVERY) as running:
        yield running


@pytest.fixture
async def api(processes: Processes) -> AsyncIterator[Api]:
    async with process_api(processes) as client:
        yield client


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with receiving() as running:
        yield running


def kill(processes: Processes, process: Any) -> None:
    processes.stop(process, signal.SIGKILL)


async def endpoint(api: Api, url: str, events: list[str]) -> dict[str, Any]:
    answer = await api.key.post("/v1/webhooks", json={"url": url, "events": events})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def deliveries_once(api: Api, endpoint_id: str, done: Any, timeout: float = 30) -> list[dict[str, Any]]:
    """The endpoint's deliveries once `done(deliveries)` holds."""
    until = time.monotonic() + timeout
    while True:
        answer = await api.key.get(f"/v1/webhooks/{endpoint_id}/deliveries", params={"limit": 200})
        assert answer.status_code == 200, answer.text
        found: list[dict[str, Any]] = answer.json()["items"]
        if done(found):
            return found
        assert time.monotonic() < until, found
        await asyncio.sleep(0.1)


async def inbox_until(api: Api, count: int, timeout: float = 20) -> list[dict[str, Any]]:
    """The workspace's inbox once it holds `count` items (the workers apply notices after the fact)."""
    until = time.monotonic() + timeout
    while True:
        answer = await api.key.get("/v1/inbox")
        assert answer.status_code == 200, answer.text
        items: list[dict[str, Any]] = answer.json()["items"]
        if len(items) == count:
            return items
        assert time.monotonic() < until, items
        await asyncio.sleep(0.1)


async def test_a_delivery_whose_worker_is_killed_mid_attempt_is_delivered_by_another(
    processes: Processes, api: Api, receiver: Receiver
) -> None:
    """The run's completion is appended, its delivery written and attempted; the endpoint holds the attempt
    and the worker is SIGKILLed before it hears the answer. Another worker sends it again, same id."""
    doomed = processes.worker(name="doomed")
    # The first attempt is held past the moment its worker dies; the next is answered at once.
    receiver.answers["/hook"] = [Answer(delay_s=5), Answer()]
    created = await endpoint(api, receiver.url("/hook"), ["run.completed"])
    session = await api.session()
    await api.send(session, "hello")
    events = await api.wait_for(session, run_over, timeout=20)
    (first,) = await receiver.wait("/hook", answered=False, timeout=20)
    kill(processes, doomed)
    processes.worker(name="heir")
    _, again = await receiver.wait("/hook", 2, answered=False, timeout=30)
    assert again.headers["webhook-id"] == first.headers["webhook-id"]
    payload = Webhook(created["secret"]).verify(again.body, again.headers)
    assert payload["type"] == "run.completed"
    assert payload["data"]["run_id"] == of_type(events, "run_completed")[0]["run_id"]
    (delivery,) = await deliveries_once(api, created["id"], lambda ds: ds and ds[0]["status"] == "succeeded")
    assert delivery["id"] == first.headers["webhook-id"]


async def test_an_event_appended_while_its_worker_hangs_is_delivered_after_it_is_killed(
    processes: Processes, api: Api, receiver: Receiver
) -> None:
    """The worker owning the session's partition is stopped (alive to the others, its lease still held)
    when the event is appended, and SIGKILLed before it could take the notice: its heir delivers it."""
    doomed = processes.worker(name="doomed")
    created = await endpoint(api, receiver.url("/cancelled"), ["run.cancelled"])
    session = await api.session()
    await api.register(session)
    await api.send(session, CALL)
    await first_call(api, session)
    doomed.send_signal(signal.SIGSTOP)
    async with api.as_session(session) as client:
        cancelled = await client.post(f"/v1/sessions/{session.id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    run_id = cancelled.json()["run_id"]
    await asyncio.sleep(0.5)
    assert receiver.arrived["/cancelled"] == []
    kill(processes, doomed)
    processes.worker(name="heir")
    (got,) = await receiver.wait("/cancelled", timeout=30)
    payload = Webhook(created["secret"]).verify(got.body, got.headers)
    assert (payload["type"], payload["data"]["run_id"]) == ("run.cancelled", run_id)
    await deliveries_once(api, created["id"], lambda ds: [d["status"] for d in ds] == ["succeeded"])


async def test_workers_killed_at_random_moments_lose_no_delivery(
    processes: Processes, api: Api, receiver: Receiver
) -> None:
    """Runs complete while workers are SIGKILLed at random moments (a notice taken, deliveries written, an
    attempt in flight): every completion reaches the endpoint, and each run's under one id."""
    workers = [processes.worker(name=f"w{i}") for i in range(2)]
    # Answers a little late, so attempts are often in flight when a worker dies.
    receiver.answers["/runs"] = [Answer(delay_s=0.2)]
    created = await endpoint(api, receiver.url("/runs"), ["run.completed"])
    agent = await api.agent(message_concurrency="queue")
    sessions = [await api.session(agent) for _ in range(6)]
    rng = random.Random(5)
    rounds = 4
    for round_ in range(rounds):
        for session in sessions:
            await api.send(session, "/sleep 0.1")
        await asyncio.sleep(rng.uniform(0.1, 0.8))
        kill(processes, workers.pop(rng.randrange(len(workers))))
        workers.append(processes.worker(name=f"w{round_}-new"))
    run_ids = set()
    for session in sessions:
        events = await api.wait_for(session, lambda es: sum(e["type"] in ENDS for e in es) >= rounds, timeout=60)
        run_ids |= {e["run_id"] for e in of_type(events, "run_completed")}
    assert len(run_ids) == rounds * len(sessions)
    found = await deliveries_once(
        api, created["id"], lambda ds: len(ds) == len(run_ids) and all(d["status"] == "succeeded" for d in ds), 60
    )
    ids_of_run: dict[str, set[str]] = defaultdict(set)
    for got in receiver.received["/runs"]:
        ids_of_run[json.loads(got.body)["data"]["run_id"]].add(got.headers["webhook-id"])
    assert set(ids_of_run) == run_ids
    # At least once, and a run's completion always under the one id its delivery has.
    assert all(len(ids) == 1 for ids in ids_of_run.values()), ids_of_run
    assert {next(iter(ids)) for ids in ids_of_run.values()} == {d["id"] for d in found}


async def test_a_registration_that_lapses_while_no_worker_runs_leaves_its_call_waiting(
    processes: Processes, api: Api
) -> None:
    """A registration's lease lapses while its worker lies SIGKILLed; the heir finds it lapsed, and its
    call of an on_leave "wait" tool waits for the next registration of the name instead of failing, and is
    in the inbox until one takes it."""
    doomed = processes.worker(name="doomed")
    session = await api.session()
    registered = time.monotonic()
    old = await api.register(session, ttl=8, tools=[{**WAITING, "timeout_s": 120}])
    await api.send(session, CALL)
    call = await first_call(api, session)
    assert (await api.call(session, old["id"], call["call_id"], "ack")).status_code == 200
    kill(processes, doomed)
    # Never pinged: its lease lapses 8 s after it registered, with no worker alive to see it.
    await asyncio.sleep(max(0.0, registered + 8.5 - time.monotonic()))
    assert not of_type(await api.events(session), "client_left")
    processes.worker(name="heir")
    events = await wait_for(api, session, count("client_tool_waiting", 1), timeout=20)
    assert of_type(events, "client_left")[0]["reason"] == "timed_out"
    assert not of_type(events, "client_tool_failed")
    (item,) = await inbox_until(api, 1)
    assert (item["kind"], item["call_id"], item["client_name"]) == ("call", call["call_id"], "web")
    new = await api.register(session, ttl=60, tools=[WAITING])
    events = await wait_for(api, session, count("client_tool_dispatched", 2), timeout=20)
    assert of_type(events, "client_tool_dispatched")[1]["client_id"] == new["id"]
    # Taken by the new registration, it waits no more.
    await inbox_until(api, 0)
    await answer(api, session, new["id"], call["call_id"])
    events = await api.wait_for(session, run_over, timeout=20)
    assert of_type(events, "run_completed")
    assert not of_type(events, "client_tool_failed")
