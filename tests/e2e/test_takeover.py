"""Two worker processes share the partitions; one is SIGKILLed with timers and work pending in its share,
and the other takes its partitions over within one keeper lease: every deadline still fires on time and
every run still ends."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from broker.keys import KeySpace
from broker.transport.connect import open_redis
from switchboard.processes import Processes, server_env
from tests.api_client import ENDS, whole_log
from tests.e2e.served import scripted_session
from tests.helpers import HIGHLIGHT

pytestmark = [pytest.mark.processes, pytest.mark.both_redis, pytest.mark.timeout(120)]

LEASE_S = 1.0
ACK_S = 3.0


@pytest.fixture
def two_workers(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Processes, str, str]]:
    env, key = server_env(redis_url, keeper_lease_s=str(LEASE_S), ack_timeout_s=str(ACK_S))
    processes = Processes(env, tmp_path_factory.mktemp("takeover-logs"))
    try:
        _, url = processes.api()
        yield processes, url, key
    finally:
        processes.stop_all()


async def live_workers(redis_url: str, prefix: str) -> int:
    connected = await open_redis(redis_url, name="test")
    try:
        keepers = KeySpace(prefix).keepers
        node = connected.client_for(keepers)
        seconds, micros = await node.time()
        now = seconds * 1000 + micros // 1000
        return int(await node.zcount(keepers, now, "+inf"))
    finally:
        await connected.aclose()


async def log_once(
    http: httpx.AsyncClient, sid: str, token: str, kinds: tuple[str, ...], timeout_s: float
) -> list[dict[str, Any]]:
    """The session's log once it holds an event of one of `kinds`."""
    auth = {"Authorization": f"Bearer {token}"}
    path = f"/v1/sessions/{sid}/events"
    async with asyncio.timeout(timeout_s):
        while True:
            log = await whole_log(lambda params: http.get(path, params=params, headers=auth))
            if any(e["type"] in kinds for e in log):
                return log
            await asyncio.sleep(0.05)


def at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["created_at"])).timestamp()


async def test_a_sigkilled_workers_partitions_are_taken_over_within_a_lease(
    two_workers: tuple[Processes, str, str], redis_url: str
) -> None:
    processes, url, key = two_workers
    doomed = processes.worker(name="doomed")
    processes.worker(name="survivor")
    prefix = processes.env["SWITCHBOARD_KEY_PREFIX"]
    async with asyncio.timeout(20):
        while await live_workers(redis_url, prefix) < 2:
            await asyncio.sleep(0.1)
    sessions = [await scripted_session(url, key, f"s{i}") for i in range(16)]
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        for sid, token in sessions:
            auth = {"Authorization": f"Bearer {token}"}
            body = {"name": "web", "lifetime": {"type": "never"}, "tools": [HIGHLIGHT]}
            assert (await http.post(f"/v1/sessions/{sid}/clients", json=body, headers=auth)).status_code == 201
            text = {"type": "input", "text": "/call client__web__highlight_row"}
            assert (await http.post(f"/v1/sessions/{sid}/events", json=text, headers=auth)).status_code == 200
        # Every call dispatched and nobody acks: each ack deadline is pending in some worker's share.
        for sid, token in sessions:
            await log_once(http, sid, token, ("client_tool_dispatched",), 10)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        killed_at = time.time()
        logs = [await log_once(http, sid, token, ENDS, 20) for sid, token in sessions]
    late = []
    for log in logs:
        (dispatched,) = [e for e in log if e["type"] == "client_tool_dispatched"]
        (failed,) = [e for e in log if e["type"] == "client_tool_failed"]
        assert failed["reason"] == "ack_timeout"
        assert [e["type"] for e in log if e["type"] in ENDS] == ["run_completed"]
        # A deadline in the dead worker's share fires once the survivor keeps its partitions: at most a
        # lease after the kill, or on time if it fell due later.
        due = at(dispatched) + ACK_S
        late.append(at(failed) - max(due, killed_at))
    assert max(late) <= LEASE_S + 0.5, late
    assert await live_workers(redis_url, prefix) == 1
