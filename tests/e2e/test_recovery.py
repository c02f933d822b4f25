"""Durable recovery with real processes: SIGKILL a worker (or everything) at any point; nothing is lost,
nothing settled is repeated, and every run ends exactly once."""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from switchboard.processes import Processes
from tests.api_client import ENDS, Api, Session, check_every_run_ended_once, of_type, run_over
from tests.e2e.served import process_api, process_set

pytestmark = [pytest.mark.processes, pytest.mark.timeout(240), pytest.mark.both_redis]

FAST_RECOVERY = {
    "step_lease_s": "1",
    "server_call_lease_s": "1",
    "keeper_lease_s": "1",
    "ack_timeout_s": "30",
    "result_timeout_s": "60",
    "server_tools_module": "tests.slow_tools:TOOLS",
    # One key sends hundreds of inputs and reads twenty logs every 50 ms: what is tested is recovery, not
    # the per-credential rate limit (tests/api/test_rate_limits.py).
    "rate_limit_per_s": "0",
}


@dataclass
class Cluster:
    processes: Processes
    api: Api


@pytest.fixture
def processes(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    with process_set(redis_url, tmp_path_factory.mktemp("recovery-logs"), **FAST_RECOVERY) as running:
        yield running


@pytest.fixture
async def cluster(processes: Processes) -> AsyncIterator[Cluster]:
    async with process_api(processes) as api:
        yield Cluster(processes, api)


def kill(processes: Processes, process: Any) -> None:
    processes.stop(process, signal.SIGKILL)


async def test_a_step_whose_worker_is_killed_is_taken_over(cluster: Cluster) -> None:
    processes, api = cluster.processes, cluster.api
    doomed = processes.worker(name="doomed")
    session = await api.session()
    await api.send(session, "/sleep 2")
    await api.wait_for(session, lambda es: bool(of_type(es, "run_started")), timeout=10)
    kill(processes, doomed)
    processes.worker(name="heir")
    events = await api.wait_for(session, run_over, timeout=20)
    assert [e["type"] for e in events].count("run_started") == 1
    assert of_type(events, "run_completed")
    assert [m["message"]["content"][0]["data"]["text"] for m in of_type(events, "message_assistant")] == [
        "You said: /sleep 2"
    ]
    timing = (
        await api.key.get(f"/v1/sessions/{session.id}/events", params={"include": "timing", "order": "asc"})
    ).json()
    steps = [e["payload"] for e in timing["items"] if e["type"] == "custom" and e["payload"]["scope"] == "step"]
    assert [s["attempt"] for s in steps] == [1]


async def test_a_server_call_in_flight_when_its_worker_dies_becomes_an_error_result(cluster: Cluster) -> None:
    processes, api = cluster.processes, cluster.api
    doomed = processes.worker(name="doomed")
    agent = await api.agent(server_tools=["slow"])
    session = await api.session(agent)
    await api.send(session, '/call slow {"seconds": 30}')
    await api.wait_for(session, lambda es: bool(of_type(es, "tool_call")), timeout=10)
    await asyncio.sleep(0.5)
    kill(processes, doomed)
    processes.worker(name="heir")
    events = await api.wait_for(session, run_over, timeout=20)
    result = of_type(events, "tool_result")[0]
    assert result["is_error"] is True
    assert "interrupted" in result["content"][0]["data"]["text"]
    assert of_type(events, "run_completed")
    assert len(of_type(events, "tool_result")) == 1


async def test_a_run_waiting_on_a_client_survives_a_full_restart(cluster: Cluster) -> None:
    processes, api = cluster.processes, cluster.api
    processes.worker()
    session = await api.session()
    web = await api.register(session, ttl=None)
    await api.send(session, "/call client__web__highlight_row")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")), timeout=10)
    call_id = of_type(events, "client_tool_dispatched")[0]["call_id"]
    # Everything but Redis goes down hard, then comes back.
    port = int(api.stack.url.rsplit(":", 1)[1])
    for process in list(processes.running):
        kill(processes, process)
    processes.api(port=port, name="api-again")
    processes.worker(name="worker-again")
    assert (await api.call(session, web["id"], call_id, "result", text="still here")).status_code == 204
    events = await api.wait_for(session, run_over, timeout=10)
    final = of_type(events, "message_assistant")[-1]["message"]["content"][0]["data"]["text"]
    assert final == "client__web__highlight_row: still here"


async def answer_calls(api: Api, sessions: list[Session], web: dict[str, dict[str, Any]], stop: asyncio.Event) -> None:
    """Answer every call dispatched in `sessions`, reading each log onward from where it last was."""
    seen = dict.fromkeys((s.id for s in sessions), 0)
    while not stop.is_set():
        for session in sessions:
            params: dict[str, str | int] = {"order": "asc", "limit": 100, "after_seq": seen[session.id]}
            answer = await api.key.get(f"/v1/sessions/{session.id}/events", params=params)
            if answer.status_code == 429:
                # Twenty logs read every 50 ms are over one key's rate limit: waited out as a client would.
                await asyncio.sleep(float(answer.headers["Retry-After"]))
                continue
            assert answer.status_code == 200, answer.text
            for event in answer.json()["items"]:
                seen[session.id] = event["seq"]
                if event["type"] == "client_tool_dispatched":
                    await api.call(session, web[session.id]["id"], event["call_id"], "result", text="ok")
        await asyncio.sleep(0.05)


async def queued_sessions(api: Api, count: int) -> tuple[list[Session], dict[str, dict[str, Any]]]:
    """`count` sessions of one agent with the calculator, each with a client `web` that never lapses. One
    run per input (`queue`), so every input must end in exactly one terminal event."""
    agent = await api.agent(server_tools=["calculate"], message_concurrency="queue")
    sessions = [await api.session(agent) for _ in range(count)]
    return sessions, {s.id: await api.register(s, ttl=None) for s in sessions}


def replace_one(processes: Processes, workers: list[Any], rng: random.Random, name: str) -> None:
    """SIGKILL a random worker of `workers` and start a fresh one, `name`, in its place."""
    kill(processes, workers.pop(rng.randrange(len(workers))))
    workers.append(processes.worker(name=name))


async def test_workers_killed_at_random_moments_lose_nothing(cluster: Cluster) -> None:
    processes, api = cluster.processes, cluster.api
    workers = [processes.worker(name=f"w{i}") for i in range(2)]
    sessions, web = await queued_sessions(api, 6)
    stop = asyncio.Event()
    answering = asyncio.create_task(answer_calls(api, sessions, web, stop))
    rng = random.Random(7)
    text = '/call client__web__highlight_row {"row_id": "1"}\n/call calculate {"expression": "2*3"}\n/sleep 0.3'
    runs = 0
    try:
        for round_ in range(4):
            for session in sessions:
                await api.send(session, text if round_ % 2 == 0 else "/sleep 0.2")
                runs += 1
            # Kill a worker at a random moment while the runs are under way, and start a fresh one.
            await asyncio.sleep(rng.uniform(0.1, 0.8))
            replace_one(processes, workers, rng, f"w{round_}-new")
        for session in sessions:
            await api.wait_for(session, lambda es: sum(e["type"] in ENDS for e in es) >= 4, timeout=60)
    finally:
        stop.set()
        await answering
    for session in sessions:
        events = await api.events(session)
        check_every_run_ended_once(events)
    assert runs == 24


async def kill_workers_until(processes: Processes, workers: list[Any], done: asyncio.Event, seed: int) -> int:
    """SIGKILL a random worker every 0.5 to 2 s and start a fresh one, until `done`; how many died. (A
    fresh worker costs about a second of CPU to start: killing faster measures the machine, not us.)"""
    rng = random.Random(seed)
    killed = 0
    while not done.is_set():
        await asyncio.sleep(rng.uniform(0.5, 2.0))
        killed += 1
        replace_one(processes, workers, rng, f"soak-{killed}")
    return killed


# Hundreds of runs on processes killed and started all along take both cores: beside another test, its
# runs missed their deadline (seen on the Cluster, across both cores).
@pytest.mark.solo
async def test_hundreds_of_runs_under_continuous_worker_kills_each_end_once(cluster: Cluster) -> None:
    processes, api = cluster.processes, cluster.api
    workers = [processes.worker(name=f"w{i}") for i in range(2)]
    # 500 runs: twenty sessions of 25 queued runs each (the runs of a session go one after another, so
    # the sessions are many and the queues short: the kills meet as many runs, in half the time). 200 were
    # over before the fifth kill once runs got quicker.
    sessions, web = await queued_sessions(api, 20)
    per_session = 25
    text = '/call client__web__highlight_row {"row_id": "1"}\n/call client__web__highlight_row {"row_id": "2"}'
    text += '\n/call calculate {"expression": "6*7"}'
    stop, all_ended = asyncio.Event(), asyncio.Event()
    answering = asyncio.create_task(answer_calls(api, sessions, web, stop))
    killing = asyncio.create_task(kill_workers_until(processes, workers, all_ended, seed=11))
    try:
        for _ in range(per_session):
            for session in sessions:
                await api.send(session, text)
        for session in sessions:
            await api.wait_for(session, lambda es: sum(e["type"] in ENDS for e in es) >= per_session, timeout=150)
    finally:
        all_ended.set()
        killed = await killing
        stop.set()
        await answering
    assert killed >= 5
    for session in sessions:
        events = await api.events(session)
        check_every_run_ended_once(events)
        assert sum(e["type"] == "run_completed" for e in events) == per_session


async def test_an_approval_deadline_passed_while_no_worker_ran_fires_on_restart(cluster: Cluster) -> None:
    """The worker is SIGKILLed while an approval waits; its deadline passes with no worker to see it; a
    fresh worker resolves it as a deny (reason timeout) once, and the run goes on."""
    processes, api = cluster.processes, cluster.api
    worker = processes.worker()
    timed = {"policy": "require_approval", "approval_timeout_s": 2}
    session = await api.session(server_tools=["calculate"], server_tool_policies={"calculate": timed})
    await api.send(session, '/call calculate {"expression": "6*7"}')
    await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")), timeout=15)
    kill(processes, worker)
    await asyncio.sleep(3.5)
    assert not of_type(await api.events(session), "approval_resolved")
    processes.worker(name="worker-again")
    events = await api.wait_for(session, run_over, timeout=20)
    (resolved,) = of_type(events, "approval_resolved")
    assert (resolved["decision"], resolved["reason"]) == ("deny", "timeout")
    check_every_run_ended_once(events)
    assert of_type(events, "run_completed")
