"""Two API processes and two workers, sharing nothing but Redis, serve one session correctly."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from switchboard.processes import Processes, server_env
from tests.e2e.served import scripted_session
from tests.helpers import HIGHLIGHT
from tests.sse import Frames

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]


@pytest.fixture
def cluster(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], str]]:
    env, key = server_env(redis_url, ack_timeout_s="5")
    processes = Processes(env, tmp_path_factory.mktemp("cluster-logs"))
    try:
        urls = [processes.api(name=f"api-{i}")[1] for i in range(2)]
        for i in range(2):
            processes.worker(name=f"worker-{i}")
        yield urls, key
    finally:
        processes.stop_all()


def worker_check(env: dict[str, str]) -> int:
    command = [sys.executable, "-m", "switchboard", "worker", "--check"]
    return subprocess.run(command, env={**os.environ, **env}, capture_output=True, timeout=30).returncode


def test_worker_check_reports_this_hosts_worker(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    env, _ = server_env(redis_url)
    processes = Processes(env, tmp_path_factory.mktemp("check-logs"))
    assert worker_check(env) == 1
    worker = processes.worker()
    try:
        deadline = time.monotonic() + 15
        while worker_check(env) != 0:
            assert time.monotonic() < deadline, processes.tail()
            time.sleep(0.2)
    finally:
        processes.stop(worker)
    # A worker that stopped cleanly takes its health key with it.
    assert worker_check(env) == 1


async def test_a_session_across_two_apis_and_two_workers(cluster: tuple[list[str], str]) -> None:
    (first, second), key = cluster
    sid, token = await scripted_session(first, key, "spread")
    auth = {"Authorization": f"Bearer {token}"}
    # The client streams from the first API and answers through the second; input goes through the first.
    async with (
        httpx.AsyncClient(base_url=first, headers=auth, timeout=10) as one,
        httpx.AsyncClient(base_url=second, headers=auth, timeout=10) as two,
    ):
        lifetime = {"type": "ttl", "data": {"seconds": 60}}
        web = (
            await two.post(
                f"/v1/sessions/{sid}/clients", json={"name": "web", "lifetime": lifetime, "tools": [HIGHLIGHT]}
            )
        ).json()
        async with one.stream("GET", f"/v1/sessions/{sid}/events/stream", params={"after_seq": 0}) as stream:
            frames = Frames(stream)
            seen: list[dict[str, Any]] = []
            for run in range(6):
                lines = "\n".join(f'/call client__web__highlight_row {{"row_id": "{run}-{i}"}}' for i in range(3))
                await one.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": lines})
                while True:
                    event = await frames.event(timeout=10)
                    seen.append(event)
                    if event["type"] == "client_tool_dispatched":
                        call = f"/v1/sessions/{sid}/clients/{web['id']}/calls/{event['call_id']}"
                        assert (await two.post(f"{call}/ack")).status_code == 200
                        answer = await two.post(f"{call}/result", json={"text": f"done {event['arguments']['row_id']}"})
                        assert answer.status_code == 204
                    if event["type"] == "run_completed":
                        break
                await asyncio.sleep(0)
    kinds = [e["type"] for e in seen]
    assert kinds.count("run_completed") == 6
    assert kinds.count("client_tool_dispatched") == kinds.count("tool_result") == 18
    assert "client_tool_failed" not in kinds
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(set(seqs))
    finals = [e for e in seen if e["type"] == "message_assistant" and e["message"]["content"][0]["type"] == "text"]
    assert finals[-1]["message"]["content"][0]["data"]["text"].splitlines() == [
        f"client__web__highlight_row: done 5-{i}" for i in range(3)
    ]


def test_a_worker_stops_cleanly_on_sigterm(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    env, _ = server_env(redis_url)
    logs = tmp_path_factory.mktemp("sigterm-logs")
    processes = Processes(env, logs)
    worker = processes.worker(name="stopping")
    try:
        deadline = time.monotonic() + 15
        while worker_check(env) != 0:
            assert time.monotonic() < deadline, processes.tail()
            time.sleep(0.2)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, processes.tail()
    finally:
        processes.stop_all()
    assert "Traceback" not in (logs / "stopping.log").read_text()


def test_an_api_whose_port_is_taken_exits_with_the_reason(redis_url: str) -> None:
    # It used to log the refusal and hang in its shutdown: the cancel of its Redis probe was lost when it
    # landed while a PING was in flight, and the lifespan waited on the probe for ever.
    env, _ = server_env(redis_url)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        command = [sys.executable, "-m", "switchboard", "api"]
        environment = {**os.environ, **env, "SWITCHBOARD_HOST": "127.0.0.1", "SWITCHBOARD_PORT": str(port)}
        done = subprocess.run(command, env=environment, capture_output=True, timeout=30)
    assert done.returncode != 0
    assert b"address already in use" in done.stderr + done.stdout
