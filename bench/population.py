"""A population of sessions and ttl clients for the scenarios that need many (state, load)."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from dataclasses import dataclass

import httpx

from bench.harness import TOOL, keyed, new_session
from bench.http import RawHttp

TTL_S = 20
CONCURRENCY = 64


@dataclass
class Client:
    session_id: str
    token: str
    client_id: str


async def sessions(admin: httpx.AsyncClient, agent_id: str, count: int) -> list[tuple[str, str]]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one() -> tuple[str, str]:
        async with gate:
            return await new_session(admin, agent_id)

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def register(http: RawHttp, sessions: list[tuple[str, str]], per_session: int) -> list[Client]:
    """Register the clients, pinging each once a third of its ttl has passed since it was registered or
    last pinged: on a slow machine registering them all takes longer than a ttl, and none may lapse
    before the steady pings reach it. The CONCURRENCY workers take a due ping before the next
    registration, so keeping the registered alive never waits behind the ones still to come."""
    body = {"name": "tab", "lifetime": {"type": "ttl", "data": {"seconds": TTL_S}}, "tools": [TOOL]}
    todo = [(sid, token) for sid, token in sessions for _ in range(per_session)]
    registered: list[Client] = []
    due: collections.deque[tuple[float, Client]] = collections.deque()  # oldest first

    async def register_one(session_id: str, token: str) -> None:
        path = f"/v1/sessions/{session_id}/clients"
        status, content = await http.request("POST", path, body, keyed(), token=token)
        assert status == 201, content
        client = Client(session_id, token, json.loads(content)["id"])
        registered.append(client)
        due.append((time.monotonic(), client))

    async def worker() -> None:
        while todo or (due and len(registered) < len(sessions) * per_session):
            if due and time.monotonic() - due[0][0] >= TTL_S / 3:
                _, client = due.popleft()
                await ping(http, client)
                due.append((time.monotonic(), client))
            elif todo:
                await register_one(*todo.pop())
            else:
                await asyncio.sleep(0.05)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return registered


async def ping(http: RawHttp, client: Client) -> float:
    path = f"/v1/sessions/{client.session_id}/clients/{client.client_id}/ping"
    sent = time.perf_counter()
    status, content = await http.request("POST", path, None, keyed(), token=client.token)
    if status != 200:
        raise RuntimeError(f"ping {status}: {content[:200]!r}")
    return (time.perf_counter() - sent) * 1000


async def steady_pings(http: RawHttp, clients: list[Client], seconds: float) -> tuple[list[float], float]:
    """Every client pings once per ttl/2, spread evenly: per-ping latency (ms) and pings per second."""
    period = TTL_S / 2
    latencies: list[float] = []
    pending: set[asyncio.Task[float]] = set()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(client: Client) -> float:
        async with gate:
            latency = await ping(http, client)
        latencies.append(latency)
        return latency

    started = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed / period * len(clients))
        while sent < due:
            task = asyncio.create_task(one(clients[sent % len(clients)]))
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent += 1
        await asyncio.sleep(0.005)
    await asyncio.gather(*pending)
    return latencies, len(latencies) / (time.monotonic() - started)
