"""Scenario 10: what a master's failover costs, on a 3-master Redis Cluster with one replica each.

Sessions register clients as fast as they can (each registration answered 201 is a write Redis
acknowledged); one master is SIGKILLed mid-way and its replica promoted; registrations go on. Then every
session's client list is read: an acknowledged registration missing from it was lost. Redis replicates
asynchronously: a master acknowledges a write before its replica has it, so what it acknowledged in its
last moments (its replication lag, sub-millisecond on one machine, more across a network) can be lost.
Also reported: how long the dead master's sessions were refused (503) before its replica served them.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import httpx

from bench.harness import Cluster, Figure, Size, cluster, figure, keyed, new_session, scripted_agent
from bench.http import RawHttp
from broker.keys import KeySpace
from broker.transport.connect import open_redis

# The API's limit is 32 active clients per session; each session registers up to this many.
PER_SESSION = 30
# Between one session's registrations: its 30 span the kill (at 1 s) and the failover after it.
PACE_S = 0.15


@dataclass
class _Writer:
    session_id: str
    http: RawHttp
    on_victim: bool = False
    acknowledged: list[str] = field(default_factory=list)
    refused: int = 0
    refused_from: float | None = None
    served_again: float | None = None


async def _register(writer: _Writer, stop: asyncio.Event, count: int = PER_SESSION) -> None:
    body = {"lifetime": {"type": "never"}, "tools": []}
    for number in range(count):
        if stop.is_set():
            return
        path = f"/v1/sessions/{writer.session_id}/clients"
        while True:
            status, content = await writer.http.request("POST", path, {**body, "name": f"c{number}"}, keyed())
            if status == 201:
                writer.acknowledged.append(json.loads(content)["id"])
                if writer.refused_from is not None and writer.served_again is None:
                    writer.served_again = time.monotonic()
                break
            writer.refused += 1
            if writer.refused_from is None:
                writer.refused_from = time.monotonic()
            await asyncio.sleep(0.05)
        await asyncio.sleep(PACE_S)


async def _once(running: Cluster, sessions: int, per_session: int = PER_SESSION) -> tuple[int, int, int, float]:
    """One failover: (registrations acknowledged on the killed master's sessions, of those lost, refused
    requests, seconds its sessions were refused)."""
    made = running.made
    assert made is not None
    async with running.client() as admin:
        agent_id = await scripted_agent(admin)
        writers = [_Writer(*(await _opened(running, admin, agent_id))) for _ in range(sessions)]
    connected = await open_redis(running.redis.url)
    slots = connected.slots
    assert slots is not None
    await slots.refresh()
    keys = KeySpace("bench")
    owners = [slots.address(slots.slot(keys.session(w.session_id).meta)) for w in writers]
    await connected.aclose()
    victim_address = owners[0]
    victim = next(node for node in made.nodes if f"127.0.0.1:{node.port}" == victim_address)
    for writer, address in zip(writers, owners, strict=True):
        writer.on_victim = address == victim_address
    stop = asyncio.Event()
    writing = [asyncio.create_task(_register(writer, stop, per_session)) for writer in writers]
    await asyncio.sleep(1.0)
    killed_at = time.monotonic()
    victim.kill()
    try:
        await asyncio.wait_for(asyncio.gather(*writing), timeout=120)
    finally:
        stop.set()
    lost = 0
    acknowledged = 0
    on_victim = [writer for writer in writers if writer.on_victim]
    for writer in on_victim:
        status, content = await writer.http.request("GET", f"/v1/sessions/{writer.session_id}/clients")
        assert status == 200, content
        present = {item["id"] for item in json.loads(content)["items"]}
        acknowledged += len(writer.acknowledged)
        lost += sum(1 for client_id in writer.acknowledged if client_id not in present)
    for writer in writers:
        writer.http.close()
    refused = sum(w.refused for w in writers if w.on_victim)
    back = [w.served_again for w in writers if w.on_victim and w.served_again is not None]
    outage = (max(back) - killed_at) if back else 0.0
    return acknowledged, lost, refused, outage


async def _opened(running: Cluster, admin: httpx.AsyncClient, agent_id: str) -> tuple[str, RawHttp]:
    session_id, token = await new_session(admin, agent_id)
    return session_id, RawHttp(running.url, token)


def run(size: Size) -> list[Figure]:
    # A smoke run's 6 sessions still put at least one on the killed master (the first session's).
    failovers, sessions = size.pick(smoke=(1, 6), quick=(1, 30), full=(3, 45))
    # A smoke run's 10 a session still span the kill (at 1 s): the killed master's sessions retry each
    # refused registration until its replica serves them.
    per_session = size.pick(smoke=10, quick=PER_SESSION, full=PER_SESSION)
    totals = [0, 0, 0]
    outages: list[float] = []
    for _ in range(failovers):
        with cluster(masters=3, replicas=1) as running:
            acknowledged, lost, refused, outage = asyncio.run(_once(running, sessions, per_session))
        totals[0] += acknowledged
        totals[1] += lost
        totals[2] += refused
        outages.append(outage)
    return [
        figure("10 failover", "acknowledged writes lost, master SIGKILLed", totals[1], "",
               note=f"of {totals[0]} acknowledged on its sessions over {failovers} failover(s)"),
        figure("10 failover", "its sessions refused (503), longest", max(outages), "s",
               note=f"{totals[2]} requests refused in all; cluster-node-timeout 2 s"),
    ]  # fmt: skip
