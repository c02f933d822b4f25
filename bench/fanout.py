"""Scenario 5: thousands of SSE streams on one API process, all on one session (every tab of a very busy
page): how long a published event takes to reach every stream, how many Redis connections the API holds,
what a stream costs in memory, and the API's CPU per event per stream. The reference is the same event
reaching a single stream, measured in the same run. Then the 5,000 streams are spread over two API
processes (a second started for it), half on each: what spreading does on this machine's cores.

The streams are read by a lean asyncio protocol that only notes when a chunk carrying the published event
type arrives, so the reader costs a few µs per chunk and the figures measure the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from redis.asyncio import Redis

from bench.harness import (
    TOOL,
    Cluster,
    Figure,
    Size,
    cluster,
    cpu_count,
    cpu_seconds,
    created_at_s,
    enough_files,
    figure,
    registered,
    rss_kb,
    scripted_agent,
    summary,
)

MARKER = b'"type":"client_tools_updated"'
# The fan-out the target is set for; measured on one API process, then spread over two.
SPREAD_SIZE = 5000
OPEN_CONCURRENCY = 200


class _Reader(asyncio.Protocol):
    """One event stream: the arrival time of every chunk that carries MARKER, nothing parsed."""

    def __init__(self, request: bytes, opened: asyncio.Future[None]) -> None:
        self._request = request
        self._opened = opened
        self._head = b""
        self._carry = b""
        self.arrivals: list[float] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's, so no isinstance check here.
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        at = time.time()
        if not self._opened.done():
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            if b" 200 " not in self._head.split(b"\r\n", 1)[0]:
                self._opened.set_exception(RuntimeError(f"stream refused: {self._head[:80]!r}"))
                return
            self._opened.set_result(None)
            data = self._head[end + 4 :]
        # A marker split across two reads is found in the carried tail of the first.
        window = self._carry + data
        self.arrivals.extend([at] * window.count(MARKER))
        self._carry = window[-(len(MARKER) - 1) :]

    def connection_lost(self, error: Exception | None) -> None:
        if not self._opened.done():
            self._opened.set_exception(error or ConnectionError("stream closed"))


async def _open(url: str, session_id: str, token: str, count: int) -> list[_Reader]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    request = (
        f"GET /v1/sessions/{session_id}/events/stream HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(OPEN_CONCURRENCY)

    async def one() -> _Reader:
        async with gate:
            opened: asyncio.Future[None] = loop.create_future()
            reader = _Reader(request, opened)
            await loop.create_connection(lambda: reader, host, port)
            await asyncio.wait_for(opened, 60)
            return reader

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def _api_connections(url: str) -> int:
    redis = Redis.from_url(url)
    try:
        clients: list[dict[str, Any]] = await redis.client_list()
        return sum(1 for c in clients if c.get("name") == "switchboard-api")
    finally:
        await redis.aclose()


async def _publish(party: Any, readers: list[_Reader], publishes: int) -> list[float]:
    """Publish `publishes` events one after another (each once every stream has the last); per stream and
    event, from the event's commit to the stream's reader seeing it (ms)."""
    latencies: list[float] = []
    for turn in range(publishes):
        tools = [{**TOOL, "description": f"version {turn}"}]
        status, content = await party.http.request(
            "PUT", f"/v1/sessions/{party.id}/clients/{party.client_id}/tools", {"tools": tools}
        )
        assert status == 200, content
        committed = created_at_s(json.loads(content))
        until = time.monotonic() + 30
        while any(len(r.arrivals) <= turn for r in readers):
            if time.monotonic() > until:
                missing = sum(1 for r in readers if len(r.arrivals) <= turn)
                raise TimeoutError(f"{missing} of {len(readers)} streams never got event {turn}")
            await asyncio.sleep(0.005)
        latencies += [(r.arrivals[turn] - committed) * 1000 for r in readers]
        await asyncio.sleep(0.05)
    return latencies


@dataclass(frozen=True)
class _Pauses:
    """How long the streams settle once open (`opened_s`) and the API once they close (`closed_s`)."""

    opened_s: float = 0.5
    closed_s: float = 1.0


async def _measure(
    running: Cluster, sizes: list[int], publishes: int, spread_size: int, pauses: _Pauses
) -> list[Figure]:
    figures: list[Figure] = []
    async with running.client() as admin:
        agent_id = await scripted_agent(admin)
        single: dict[str, float] = {}
        one_process: dict[str, float] = {}
        for size in sizes:
            party = await registered(running, admin, agent_id)
            before = rss_kb(running.api_pid)
            opening = time.monotonic()
            readers = await _open(running.url, party.id, party.token, size)
            opened_s = time.monotonic() - opening
            await asyncio.sleep(pauses.opened_s)
            per_stream_kb = (rss_kb(running.api_pid) - before) / size
            connections = await _api_connections(running.redis.url)
            cpu_before = cpu_seconds(running.api_pid)
            latency = summary(await _publish(party, readers, publishes))
            per_delivery_us = (cpu_seconds(running.api_pid) - cpu_before) / (publishes * size) * 1e6
            _close(readers)
            party.close()
            await asyncio.sleep(pauses.closed_s)
            if size == 1:
                single = latency
                continue
            label = f"{size:,} streams"
            figures += [
                figure("5 fan-out", f"{label}, publish to client p50", latency["p50"], "ms",
                       baseline=single["p50"], baseline_name="1 stream p50"),
                figure("5 fan-out", f"{label}, publish to client p99", latency["p99"], "ms",
                       baseline=single["p99"], baseline_name="1 stream p99",
                       target="value < 100" if size == 5000 else ""),
                figure("5 fan-out", f"{label}, API Redis connections", connections, "",
                       note="CLIENT LIST name=switchboard-api, pub/sub included"),
                figure("5 fan-out", f"{label}, API memory per stream", per_stream_kb, "KiB",
                       note=f"RSS growth / streams; {size:,} opened in {opened_s:.1f} s"),
                figure("5 fan-out", f"{label}, API CPU per event per stream", per_delivery_us, "us",
                       note="the API process's CPU over the publishes / (events x streams)"),
            ]  # fmt: skip
            if size == spread_size:
                one_process = latency
        if spread_size in sizes:
            figures += await _spread(running, admin, agent_id, publishes, one_process, spread_size, pauses)
    return figures


def _close(readers: list[_Reader]) -> None:
    for reader in readers:
        if reader.transport is not None:
            reader.transport.close()


async def _spread(
    running: Cluster,
    admin: Any,
    agent_id: str,
    publishes: int,
    one_process: dict[str, float],
    size: int,
    pauses: _Pauses,
) -> list[Figure]:
    """The same streams over API processes sharing the deployment (a second one started here), half on
    each: what spreading does to publish-to-client latency on this machine's cores."""
    second, second_url = running.processes.api(name="api-spread")
    try:
        party = await registered(running, admin, agent_id)
        readers = [
            *await _open(running.url, party.id, party.token, size // 2),
            *await _open(second_url, party.id, party.token, size - size // 2),
        ]
        await asyncio.sleep(pauses.opened_s)
        latency = summary(await _publish(party, readers, publishes))
        _close(readers)
        party.close()
        await asyncio.sleep(pauses.closed_s)
    finally:
        second.terminate()
        second.wait(30)
    label = f"{size:,} streams over 2 API processes"
    return [
        figure("5 fan-out", f"{label}, publish to client p50", latency["p50"], "ms",
               baseline=one_process["p50"], baseline_name="one API process p50"),
        figure("5 fan-out", f"{label}, publish to client p99", latency["p99"], "ms",
               baseline=one_process["p99"], baseline_name="one API process p99", target="value < 100",
               note=f"{cpu_count()} cores shared by both APIs, Redis, the worker and the readers"),
    ]  # fmt: skip


def run(size: Size) -> list[Figure]:
    sizes = size.pick(smoke=[1, 50], quick=[1, 1000, SPREAD_SIZE], full=[1, 1000, SPREAD_SIZE, 10_000])
    publishes = size.pick(smoke=2, quick=5, full=20)
    # The streams spread over two API processes: the fan-out the target is set for, or a smoke run's largest.
    spread_size = size.pick(smoke=sizes[-1], quick=SPREAD_SIZE, full=SPREAD_SIZE)
    pauses = size.pick(smoke=_Pauses(0.2, 0.2), quick=_Pauses(), full=_Pauses())
    enough_files(max(sizes))
    # Thousands of streams on one session by one credential: the caps that keep one session token from
    # holding a process's connections would measure themselves, not the fan-out under them.
    uncapped = {"SWITCHBOARD_MAX_STREAMS_PER_SESSION": "0", "SWITCHBOARD_MAX_STREAMS_PER_CREDENTIAL": "0"}
    with cluster(extra=uncapped) as running:
        with contextlib.suppress(ImportError):
            import uvloop

            return uvloop.run(_measure(running, sizes, publishes, spread_size, pauses))
        return asyncio.run(_measure(running, sizes, publishes, spread_size, pauses))
