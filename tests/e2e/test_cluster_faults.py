"""Faults of a real Redis Cluster under a running API and worker: a reshard while calls are in flight
loses and repeats nothing; a master that dies with no replica costs its partitions a fast 503 while the
others carry on; a master that dies with a replica is replaced and the runs go on."""

from __future__ import annotations

import asyncio
import gc
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.keys import KeySpace
from broker.partitions import PARTITIONS, SLOT_STRIDE, partition_of
from broker.transport.embedded import EmbeddedCluster, EmbeddedRedis
from broker.transport.slots import SlotMap
from switchboard.settings import Settings
from tests.api_client import Api, Event, Session, check_every_run_ended_once, of_type, running_api
from tests.helpers import Exposition

pytestmark = [
    pytest.mark.timeout(180),
    # A node killed under open connections: redis-py's connections to it close their transports without
    # waiting for them (or, failing to, keep their writer). The fixture collects them while these
    # filters hold, so none can surface in a later test.
    pytest.mark.filterwarnings("ignore:unclosed <StreamWriter:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:unclosed Connection:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:loop is closed:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:unclosed transport:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
]

# Deadlines far longer than a failover, so only a fault could fail a call.
PATIENT = {"ack_timeout_s": 30.0, "result_timeout_s": 60.0, "step_lease_s": 3.0, "server_call_lease_s": 3.0}


def started(tmp: Path, masters: int, replicas: int) -> Iterator[EmbeddedCluster]:
    cluster = EmbeddedCluster(tmp, masters=masters, replicas=replicas)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def three_masters(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    yield from started(tmp_path / "cluster", 3, 0)


@pytest.fixture
def with_replicas(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    yield from started(tmp_path / "cluster", 3, 1)


@pytest.fixture
async def api_on(settings: Settings, api_key: str) -> AsyncIterator[Any]:
    """`api_on(cluster)`: a stack (API and worker, in this loop) on that cluster, and a client of it."""
    stacks: list[Any] = []

    async def start(cluster: EmbeddedCluster) -> Api:
        context = running_api(settings, cluster.url, api_key, dict(PATIENT))
        stacks.append(context)
        return await context.__aenter__()

    try:
        yield start
    finally:
        for context in reversed(stacks):
            await context.__aexit__(None, None, None)
        gc.collect()


def slot_of(session_id: str) -> int:
    return partition_of(session_id) * SLOT_STRIDE


def owner(cluster: EmbeddedCluster, slot: int) -> tuple[str, EmbeddedRedis]:
    """The node id and the process of the master serving `slot`."""
    for line in cluster.cli("cluster", "nodes").splitlines():
        node_id, address, flags, *_, ranges = line.split(" ", 8)
        if "master" not in flags or "fail" in flags:
            continue
        for part in ranges.split():
            low, _, high = part.partition("-")
            if low.isdigit() and int(low) <= slot <= int(high or low):
                port = int(address.split(":")[1].split("@")[0])
                return node_id, next(node for node in cluster.nodes if node.port == port)
    raise AssertionError(f"no master serves slot {slot}")


async def post(client: httpx.AsyncClient, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    """POST with an Idempotency-Key, retried on 5xx and refused connections as the SDKs do (a fault in
    Redis answers 503 for a moment)."""
    key = secrets.token_hex(8)
    until = time.monotonic() + 30
    while True:
        try:
            answer = await client.post(path, json=body, headers={"Idempotency-Key": key})
            if answer.status_code < 500:
                return answer
        except httpx.TransportError:
            pass
        assert time.monotonic() < until, f"{path} kept failing"
        await asyncio.sleep(0.2)


async def events_of(api: Api, session: Session) -> list[Event]:
    """The session's log, read again while a failover answers 503 or drops a kept-alive connection (a
    ReadError under load, as the SDKs retry it)."""
    until = time.monotonic() + 30
    while True:
        try:
            return await api.events(session)
        except (AssertionError, httpx.TransportError):
            assert time.monotonic() < until
            await asyncio.sleep(0.2)


async def turns(api: Api, session: Session, client_id: str, count: int) -> None:
    """`count` runs, one client call each, answered as a tab would; each waits for its run to end."""
    async with api.as_session(session) as client:
        base = f"/v1/sessions/{session.id}"
        for turn in range(count):
            sent = await post(
                client,
                f"{base}/events",
                {"type": "input", "text": f'/call client__web__highlight_row {{"row_id": "{turn}"}}'},
            )
            assert sent.status_code == 200, sent.text
            run_id = sent.json()["run_id"]
            until = time.monotonic() + 60
            while True:
                log = await events_of(api, session)
                mine = [e for e in log if e.get("run_id") == run_id and e["type"] in ("run_completed", "run_failed")]
                if mine:
                    break
                for dispatched in of_type(log, "client_tool_dispatched"):
                    if not any(e["type"] == "tool_result" and e["call_id"] == dispatched["call_id"] for e in log):
                        call = f"{base}/clients/{client_id}/calls/{dispatched['call_id']}"
                        answer = await post(client, f"{call}/result", {"text": f"row {turn}", "is_error": False})
                        assert answer.status_code in (204, 409), answer.text
                assert time.monotonic() < until, [e["type"] for e in log]
                await asyncio.sleep(0.05)


async def settled(api: Api, sessions: list[tuple[Session, str]], runs: int) -> None:
    """Each session's runs all completed, once each, every call with one result and none failed."""
    for session, _ in sessions:
        events = await events_of(api, session)
        check_every_run_ended_once(events)
        assert len(of_type(events, "run_completed")) == runs
        assert not of_type(events, "client_tool_failed")


async def sessions_with_clients(api: Api, count: int) -> list[tuple[Session, str]]:
    agent = await api.agent()
    made = []
    for _ in range(count):
        session = await api.session(agent)
        made.append((session, (await api.register(session, ttl=None))["id"]))
    return made


@pytest.mark.skipif(
    not (shutil.which("redis-cli") or shutil.which("valkey-cli")),
    reason="the reshard is redis-cli's (--cluster reshard), and no redis-cli or valkey-cli is on PATH",
)
async def test_a_reshard_under_calls_in_flight_loses_and_repeats_nothing(
    three_masters: EmbeddedCluster, api_on: Any
) -> None:
    api: Api = await api_on(three_masters)
    made = await sessions_with_clients(api, 6)
    # Move every slot of the master that holds the first session to another master, while calls run.
    source, _ = owner(three_masters, slot_of(made[0][0].id))
    target = next(
        line.split()[0]
        for line in three_masters.cli("cluster", "nodes").splitlines()
        if "master" in line and not line.startswith(source)
    )
    work = asyncio.gather(*(turns(api, session, client_id, 8) for session, client_id in made))
    await asyncio.sleep(0.3)
    host = f"127.0.0.1:{three_masters.nodes[0].port}"
    reshard = asyncio.to_thread(
        three_masters.cli, "--cluster", "reshard", host, "--cluster-from", source, "--cluster-to", target,
        "--cluster-slots", "16384", "--cluster-yes", "--cluster-pipeline", "100",
    )  # fmt: skip
    await asyncio.gather(work, reshard)
    assert owner(three_masters, slot_of(made[0][0].id))[0] == target
    await settled(api, made, 8)


async def test_a_master_down_without_a_replica_fails_its_partitions_fast_and_spares_the_others(
    three_masters: EmbeddedCluster, api_on: Any
) -> None:
    api: Api = await api_on(three_masters)
    made = await sessions_with_clients(api, 12)
    # Not the master of the workspace's slot: that one holds every agent's versions, which every run reads
    # (give it a replica); any other may go.
    _, workspace = owner(three_masters, SlotMap.slot(KeySpace(api.stack.settings.key_prefix).workspace))
    holders = [owner(three_masters, slot_of(session.id))[1] for session, _ in made]
    victim = next(node for node in holders if node is not workspace)
    down = [made[i] for i, node in enumerate(holders) if node is victim]
    up = [made[i] for i, node in enumerate(holders) if node is not victim]
    assert up, "every session landed on one master; make more"
    victim.kill()
    for session, _ in down:
        async with api.as_session(session) as client:
            started_at = time.monotonic()
            answer = await client.get(f"/v1/sessions/{session.id}")
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] == "unavailable"
            assert answer.headers["Retry-After"] == "1"
            assert time.monotonic() - started_at < 2.0
    # The operator's figures still answer: the dead node's partitions are said to be missing, the gauges
    # show the rest, and no counter is shown short (Prometheus would take the drop for a reset).
    figures = Exposition((await api.key.get("/metrics/cluster")).text)
    unread = figures("switchboard_cluster_partitions_unread")
    assert 0 < unread < PARTITIONS
    assert figures.has("switchboard_clients_active")
    assert not figures.has("switchboard_calls_dispatched_total")
    await asyncio.gather(*(turns(api, session, client_id, 3) for session, client_id in up))
    await settled(api, up, 3)


async def test_a_master_killed_mid_run_is_replaced_by_its_replica_and_the_runs_finish(
    with_replicas: EmbeddedCluster, api_on: Any
) -> None:
    api: Api = await api_on(with_replicas)
    made = await sessions_with_clients(api, 6)
    _, victim = owner(with_replicas, slot_of(made[0][0].id))
    work = asyncio.gather(*(turns(api, session, client_id, 6) for session, client_id in made))
    await asyncio.sleep(0.5)
    victim.kill()
    await work
    await settled(api, made, 6)
