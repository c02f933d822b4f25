"""Webhooks: event-to-receipt latency of deliveries to a local receiver, at 500 deliveries a second (runs
completing at 50 a second, ten endpoints taking `run.completed`), and the same again while another
endpoint takes every event too and times out on every attempt (it accepts connections and never answers):
its deliveries must not delay the others' (target: p99 ratio <= 1.25). Event-to-receipt is the time from
the event's `created_at` (the body's `timestamp`) to the receiver reading the whole request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import httpx

from bench.harness import Cluster, Figure, Size, cluster, figure, keyed, new_session, scripted_agent, summary
from bench.http import RawHttp

FAST_ENDPOINTS = 10


@dataclass(frozen=True)
class _Shape:
    rate: float  # runs a second (each is FAST_ENDPOINTS deliveries)
    seconds: float
    sessions: int
    settle_s: float = 3.0


class _Receiver:
    """An HTTP/1.1 server answering 200 to every request at once, noting when each body arrived."""

    def __init__(self) -> None:
        self.got: list[tuple[float, bytes]] = []
        # Set once `want` bodies came (the phase sets `want` once it knows how many it sent).
        self.want = 1 << 62
        self.enough = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
                self.got.append((time.time(), body))
                if len(self.got) >= self.want:
                    self.enough.set()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


class _Silent:
    """Reads what it is sent and never answers: every attempt times out."""

    def __init__(self) -> None:
        self.writers: set[asyncio.StreamWriter] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        with contextlib.suppress(ConnectionError):
            while await reader.read(65_536):
                pass
        writer.close()

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
        # Each handler sees its connection end and returns, rather than being cancelled with the loop.
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def _serving(
    handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


async def _endpoint(admin: httpx.AsyncClient, url: str) -> None:
    answer = await admin.post("/v1/webhooks", json={"url": url, "events": ["run.completed"]})
    answer.raise_for_status()


async def _drive(running: Cluster, sessions: list[tuple[str, str]], shape: _Shape) -> int:
    """Input at `shape.rate` runs a second over the sessions; the runs started."""
    clients = [RawHttp(running.url, token) for _, token in sessions]
    total = int(shape.rate * shape.seconds)
    started = time.monotonic()
    sent: list[asyncio.Task[tuple[int, bytes]]] = []
    try:
        for i in range(total):
            wait = started + i / shape.rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            n = i % len(sessions)
            path = f"/v1/sessions/{sessions[n][0]}/events"
            sent.append(asyncio.create_task(clients[n].request("POST", path, {"type": "input", "text": "hi"}, keyed())))
        answers = await asyncio.gather(*sent)
    finally:
        for client in clients:
            client.close()
    refused = [a for a in answers if a[0] >= 300]
    if refused:
        raise RuntimeError(f"{len(refused)} inputs refused, the first: {refused[0]}")
    return total


def _latencies(got: list[tuple[float, bytes]]) -> list[float]:
    late = []
    for at, body in got:
        stamp = json.loads(body)["timestamp"]
        late.append((at - datetime.fromisoformat(stamp).timestamp()) * 1000)
    return late


async def _phase(running: Cluster, shape: _Shape, dead: bool) -> tuple[list[float], float]:
    receiver, dead_end = _Receiver(), _Silent()
    async with _serving(receiver.handle) as url, _serving(dead_end.handle) as silent, running.client() as admin:
        # Input during a run queues a run of its own: every input is one run, so one event per endpoint.
        agent_id = await scripted_agent(admin, message_concurrency="queue")
        for n in range(FAST_ENDPOINTS):
            await _endpoint(admin, f"{url}/in/{n}")
        if dead:
            await _endpoint(admin, f"{silent}/never")
        sessions = [await new_session(admin, agent_id) for _ in range(shape.sessions)]
        began = time.monotonic()
        runs = await _drive(running, sessions, shape)
        expected = runs * FAST_ENDPOINTS
        receiver.want = expected
        receiver.enough.clear()
        if len(receiver.got) >= expected:
            receiver.enough.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(shape.settle_s + shape.seconds):
                await receiver.enough.wait()
        spent = time.monotonic() - began
        if len(receiver.got) < expected:
            completed = 0
            for session_id, _ in sessions:
                page = (await admin.get(f"/v1/sessions/{session_id}/events", params={"limit": 200})).json()
                completed += sum(1 for e in page["items"] if e["type"] == "run_completed")
            raise RuntimeError(
                f"{expected - len(receiver.got)} of {expected} deliveries never arrived ({completed} of {runs}"
                " runs completed)"
            )
        # Remove them all: the next phase's endpoints are its own.
        listed = (await admin.get("/v1/webhooks", params={"limit": 200})).json()["items"]
        for endpoint in listed:
            await admin.delete(f"/v1/webhooks/{endpoint['id']}")
        await dead_end.close()
    return _latencies(receiver.got), len(receiver.got) / spent


def run(size: Size) -> list[Figure]:
    shape = size.pick(
        smoke=_Shape(rate=5, seconds=2, sessions=10),
        quick=_Shape(rate=50, seconds=5, sessions=100),
        full=_Shape(rate=50, seconds=20, sessions=200),
    )
    extra = {"SWITCHBOARD_PROVIDER_ALLOW_PRIVATE": "true"}
    with cluster(extra=extra) as running:
        alone, rate = asyncio.run(_phase(running, shape, dead=False))
        beside, rate_beside = asyncio.run(_phase(running, shape, dead=True))
    ours, with_dead = summary(alone), summary(beside)
    offered = shape.rate * FAST_ENDPOINTS
    scenario = "webhooks"
    return [
        figure(scenario, "deliveries received a second", rate, "/s", note=f"{offered:g} offered"),
        figure(scenario, "event-to-receipt p50", ours["p50"], "ms"),
        figure(scenario, "event-to-receipt p99", ours["p99"], "ms", target="value < 100"),
        figure(scenario, "event-to-receipt p99, a dead endpoint beside", with_dead["p99"], "ms",
               baseline=ours["p99"], baseline_name="no dead endpoint p99", target="ratio <= 1.25",
               note=f"{rate_beside:.0f}/s received"),
    ]  # fmt: skip
