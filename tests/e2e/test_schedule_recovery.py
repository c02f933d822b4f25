"""A schedule whose due time passes while its worker lies SIGKILLed, or hangs and is then SIGKILLed, fires
once, when a worker runs again; so do schedules due while workers are SIGKILLed at random moments."""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from switchboard.processes import Processes
from tests.api_client import Api, Event, Session
from tests.e2e.served import process_api, process_set

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120), pytest.mark.both_redis]


@pytest.fixture
def processes(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    with process_set(redis_url, tmp_path_factory.mktemp("schedule-logs"), keeper_lease_s="1") as running:
        yield running


@pytest.fixture
async def api(processes: Processes) -> AsyncIterator[Api]:
    async with process_api(processes) as client:
        yield client


def completed(runs: int) -> Callable[[list[Event]], bool]:
    return lambda events: sum(e["type"] == "run_completed" for e in events) >= runs


def fired(events: list[Event]) -> list[Event]:
    return [e for e in events if e["type"] == "message_user" and e.get("trigger") == "schedule"]


async def schedule_soon(api: Api, session: Session, seconds: float) -> tuple[str, datetime]:
    """An `at` schedule of `session` due `seconds` from now: its id and due time."""
    at = datetime.now(UTC) + timedelta(seconds=seconds)
    created = await api.key.post(
        f"/v1/sessions/{session.id}/schedules", json={"at": at.isoformat().replace("+00:00", "Z"), "text": "wake"}
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"]), at


async def heir_fires_it_once(processes: Processes, api: Api, session: Session, schedule_id: str) -> None:
    """A fresh worker takes the partition over and fires the schedule, once."""
    processes.worker(name="heir")
    events = await api.wait_for(session, lambda es: any(e["type"] == "run_completed" for e in es), timeout=20)
    (event,) = fired(events)
    assert event["schedule_id"] == schedule_id
    await asyncio.sleep(1.0)
    assert len(fired(await api.events(session))) == 1


async def test_a_schedule_due_while_its_worker_was_killed_fires_once_after_restart(
    processes: Processes, api: Api
) -> None:
    doomed = processes.worker(name="doomed")
    session = await api.session()
    schedule_id, at = await schedule_soon(api, session, 2)
    processes.stop(doomed, signal.SIGKILL)
    # The due time passes with no worker alive: nothing fires.
    await asyncio.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()) + 1.0)
    assert fired(await api.events(session)) == []
    await heir_fires_it_once(processes, api, session, schedule_id)
    assert (await api.key.get(f"/v1/sessions/{session.id}/schedules")).json()["items"] == []


async def test_a_schedule_due_while_its_worker_hangs_fires_once_after_it_is_killed(
    processes: Processes, api: Api
) -> None:
    """The worker holding the schedule's partition is alive when the schedule comes due (stopped: its lease
    still held) and is SIGKILLed before it fires it; the worker that takes the partition over fires it once."""
    doomed = processes.worker(name="doomed")
    session = await api.session()
    schedule_id, at = await schedule_soon(api, session, 3)
    await asyncio.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds() - 0.2))
    doomed.send_signal(signal.SIGSTOP)
    await asyncio.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()) + 1.0)
    assert fired(await api.events(session)) == []
    processes.stop(doomed, signal.SIGKILL)
    await heir_fires_it_once(processes, api, session, schedule_id)


async def test_schedules_due_while_workers_are_killed_at_random_moments_fire_once_each(
    processes: Processes, api: Api
) -> None:
    """Two dozen schedules come due over three seconds while a worker is SIGKILLed (and another started) at
    random moments among them: each fires exactly once."""
    workers = [processes.worker(name=f"w{i}") for i in range(2)]
    agent = await api.agent(message_concurrency="queue")
    sessions = [await api.session(agent) for _ in range(12)]
    # Far enough ahead that the last is still to come once all are made.
    start = datetime.now(UTC) + timedelta(seconds=5)
    made: dict[str, str] = {}
    for n in range(24):
        at = start + timedelta(milliseconds=125 * n)
        session = sessions[n % len(sessions)]
        created = await api.key.post(
            f"/v1/sessions/{session.id}/schedules",
            json={"at": at.isoformat().replace("+00:00", "Z"), "text": f"wake {n}"},
        )
        assert created.status_code == 201, created.text
        made[created.json()["id"]] = session.id
    rng = random.Random(3)
    await asyncio.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()))
    for round_ in range(4):
        await asyncio.sleep(rng.uniform(0.2, 0.9))
        processes.stop(workers.pop(rng.randrange(len(workers))), signal.SIGKILL)
        workers.append(processes.worker(name=f"w{round_}-new"))
    per_session = {s.id: sum(1 for sid in made.values() if sid == s.id) for s in sessions}
    for session in sessions:
        await api.wait_for(session, completed(per_session[session.id]), timeout=40)
    await asyncio.sleep(1.0)
    seen: list[str] = []
    for session in sessions:
        seen += [e["schedule_id"] for e in fired(await api.events(session))]
    assert sorted(seen) == sorted(made)
