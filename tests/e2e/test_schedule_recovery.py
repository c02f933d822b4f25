"""A schedule whose due time passes while its worker lies SIGKILLed fires once, when a worker runs again."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from switchboard.processes import Processes, server_env
from tests.api_client import Api, Event
from tests.stack import Stack

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120), pytest.mark.both_redis]


@pytest.fixture
def processes(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    env, key = server_env(redis_url, keeper_lease_s="1")
    env["TEST_API_KEY"] = key
    running = Processes(env, tmp_path_factory.mktemp("schedule-logs"))
    try:
        yield running
    finally:
        running.stop_all()


@pytest.fixture
async def api(processes: Processes) -> AsyncIterator[Api]:
    _, url = processes.api()
    client = Api(Stack(url, processes.env["TEST_API_KEY"], None, None))  # type: ignore[arg-type]
    try:
        yield client
    finally:
        await client.aclose()


def fired(events: list[Event]) -> list[Event]:
    return [e for e in events if e["type"] == "message_user" and e.get("trigger") == "schedule"]


async def test_a_schedule_due_while_its_worker_was_killed_fires_once_after_restart(
    processes: Processes, api: Api
) -> None:
    doomed = processes.worker(name="doomed")
    session = await api.session()
    at = datetime.now(UTC) + timedelta(seconds=2)
    created = await api.key.post(
        f"/v1/sessions/{session.id}/schedules", json={"at": at.isoformat().replace("+00:00", "Z"), "text": "wake"}
    )
    assert created.status_code == 201, created.text
    processes.stop(doomed, signal.SIGKILL)
    # The due time passes with no worker alive: nothing fires.
    await asyncio.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()) + 1.0)
    assert fired(await api.events(session)) == []
    processes.worker(name="heir")
    events = await api.wait_for(session, lambda es: any(e["type"] == "run_completed" for e in es), timeout=20)
    (event,) = fired(events)
    assert event["schedule_id"] == created.json()["id"]
    await asyncio.sleep(1.0)
    assert len(fired(await api.events(session))) == 1
    assert (await api.key.get(f"/v1/sessions/{session.id}/schedules")).json()["items"] == []
