"""Scenario 17: a hostile model server against a worker (docs/security.md, "A model's stream is bounded").

A local server (bench/hostile_model_server.py, the attack tests' own), in a process of its own, answers
each model call with an attack: as a Gemini server, 100 MB of `{a` lines, each its own event, which
google-genai would hold across events; then as a Chat Completions server, 50 MB and 200 MB of streamed
text (4 KiB a chunk) and 200,000 one-character tool-argument deltas. For each: the worker's peak RSS (the
run's so far) against its idle RSS, and another session's plain client-call round trip (scripted model:
input, the call dispatched, acked and answered, the run completed) while the attack runs, against its
idle figure; all measured in the same run. Targets: peak RSS within 100 MB of idle; every round trip during an attack
at most 2x the idle median, or 1 s. Also noted: how long the run took to fail, how much of the attack the
server sent before the worker hung up, the worker's CPU, and Redis's RSS.

`--smoke` runs small attacks (2 MB, 20,000 deltas, 2 MB of lines) against small bounds, in seconds.
`python -c "import bench.hostile_model as h; h.serve(PORT)"` runs the server alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import hostile_model_server
from bench.calls import Session, kind, open_session, until
from bench.harness import Cluster, Figure, Size, calls_text, cluster, cpu_seconds, figure, rss_kb, scripted_agent
from bench.hostile_model_server import (
    MODELS,
    Attack,
    Format,
    chat_benign,
    chat_stream,
    gemini_benign,
    held_lines,
    writes,
)
from bench.sse import RawStream
from broker.transport.embedded import free_port

SCENARIO = "hostile_model"
MB = 1_000_000
# How often the sampler reads the worker's and Redis's RSS during an attack.
_SAMPLE_S = 0.005


def _attack(name: str) -> Attack:
    """The attack a path's first segment names: `benign`, `text-<bytes>`, `deltas-<count>`, and Gemini's
    `gemini` (benign) and `held-<bytes>`."""
    what, _, number = name.partition("-")
    if what == "text":
        return Attack(lambda: chat_stream("text", "a" * 4_096, int(number) // 4_096))
    if what == "deltas":
        return Attack(lambda: chat_stream("arguments", "a", int(number)))
    if what == "held":
        return Attack(lambda: held_lines(int(number)))
    return Attack(gemini_benign if what == "gemini" else chat_benign)


def serve(port: int) -> None:
    """Run the hostile server (bench/hostile_model_server.py) on 127.0.0.1:`port` until killed."""
    hostile_model_server.serve(port, _attack)


@contextlib.contextmanager
def _hostile_server() -> Iterator[str]:
    port = free_port()
    code = f"import bench.hostile_model as h; h.serve({port})"
    process = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/stats", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait()


@dataclass
class _Sampler:
    """The worker's and Redis's RSS (kB), read every _SAMPLE_S on a thread of its own while it runs."""

    pids: tuple[int, int]
    peaks: list[int] = field(default_factory=lambda: [0, 0])
    _stop: threading.Event = field(default_factory=threading.Event)

    def _run(self) -> None:
        while not self._stop.is_set():
            for place, pid in enumerate(self.pids):
                self.peaks[place] = max(self.peaks[place], rss_kb(pid))
            time.sleep(_SAMPLE_S)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()


@dataclass
class _Trips:
    """Another session's round trips, each (start, end) on the monotonic clock, for as long as it runs."""

    session: Session
    done: list[tuple[float, float]] = field(default_factory=list)
    # Set once `wanted` round trips are done.
    wanted: int = 0
    enough: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            began = time.monotonic()
            await self.session.send(calls_text(1))
            dispatched = await until(self.session.events, kind("client_tool_dispatched"))
            await self.session.answer(dispatched.event["call_id"])
            await until(self.session.events, kind("run_completed"))
            self.done.append((began, time.monotonic()))
            if len(self.done) >= self.wanted:
                self.enough.set()

    def during(self, windows: list[tuple[float, float]]) -> list[float]:
        """The round trips (s) that overlapped any of `windows`."""
        return [end - start for start, end in self.done if any(start < b and end > a for a, b in windows)]


async def _provider_agent(admin: httpx.AsyncClient, hostile: str, path: str, provider_format: Format) -> str:
    # The Gemini SDK puts its own path (/v1beta/models/...) after the base URL.
    base_url = f"{hostile}/{path}" if provider_format == "gemini" else f"{hostile}/{path}/v1"
    body = {"format": provider_format, "base_url": base_url, "api_key": "sk-hostile", "display_name": "hostile"}
    provider = (await admin.post("/v1/model-providers", json=body)).json()
    agent = (await admin.post("/v1/agents", json={"name": "hostile"})).json()
    version = {"model_provider_id": provider["id"], "model": MODELS[provider_format]}
    (await admin.post(f"/v1/agents/{agent['id']}/versions", json=version)).raise_for_status()
    return str(agent["id"])


async def _run_once(running: Cluster, admin: httpx.AsyncClient, agent_id: str) -> tuple[str, float, float]:
    """One run of a hostile agent to its end: (its end event's type and error, start, end)."""
    created = (await admin.post("/v1/sessions", json={"agent_id": agent_id})).json()
    stream = await RawStream.open(running.url, created["id"], created["session_token"])
    try:
        events = stream.events(120.0)
        began = time.monotonic()
        body = {"type": "input", "text": "go"}
        (await admin.post(f"/v1/sessions/{created['id']}/events", json=body)).raise_for_status()
        ended = await until(events, lambda r: r.event["type"] in ("run_completed", "run_failed", "run_cancelled"))
        return f"{ended.event['type']}: {ended.event.get('error', '')}", began, time.monotonic()
    finally:
        stream.close()


@dataclass(frozen=True)
class _Attack:
    label: str
    path: str
    provider_format: Format = "openai_chat"

    @property
    def size(self) -> float:
        """What the whole attack would be, MB."""
        return sum(len(write) for write in writes(_attack(self.path).events())) / MB


def run(size: Size) -> list[Figure]:
    bounds = size.pick(
        smoke={"SWITCHBOARD_MODEL_MAX_TEXT_BYTES": "262144", "SWITCHBOARD_MODEL_MAX_FRAGMENTS": "2000"},
        quick={},
        full={},
    )
    extra = {"SWITCHBOARD_PROVIDER_ALLOW_PRIVATE": "true", **bounds}
    with _hostile_server() as hostile, cluster(extra=extra) as running:
        return asyncio.run(_run(running, hostile, size))


async def _run(running: Cluster, hostile: str, size: Size) -> list[Figure]:
    text_small, text_large, deltas, held = size.pick(
        smoke=(2 * MB, 2 * MB, 20_000, 2 * MB),
        quick=(50 * MB, 200 * MB, 200_000, 100 * MB),
        full=(50 * MB, 200 * MB, 200_000, 100 * MB),
    )
    repeats, idle_trips = size.pick(smoke=(1, 5), quick=(2, 20), full=(3, 50))
    # The Gemini attack first: each peak is the run's so far, and its own is the one to see.
    attacks = [
        _Attack(f"Gemini: {held // MB} MB of held lines", f"held-{held}", "gemini"),
        _Attack(f"text {text_small // MB} MB", f"text-{text_small}"),
        _Attack(f"text {text_large // MB} MB", f"text-{text_large}"),
        _Attack(f"{deltas:,} argument deltas", f"deltas-{deltas}"),
    ]
    if text_small == text_large:
        attacks.pop(2)
    worker_pid = next(p.pid for p in running.processes.running if p.pid != running.api_pid)
    redis_pid = running.redis.pid or 0
    figures: list[Figure] = []
    async with running.client() as admin:
        benign = [
            await _provider_agent(admin, hostile, "benign", "openai_chat"),
            await _provider_agent(admin, hostile, "gemini", "gemini"),
        ]
        agents = {a.path: await _provider_agent(admin, hostile, a.path, a.provider_format) for a in attacks}
        scripted = await scripted_agent(admin)
        other = await open_session(running, admin, scripted)
        # The first three warm the path; the idle figure is of the rest.
        trips = _Trips(other, wanted=idle_trips + 3)
        try:
            # Warm: the worker imports the openai and google-genai packages and opens their pools; the other
            # session's path runs.
            for agent_id in benign:
                outcome, _, _ = await _run_once(running, admin, agent_id)
                if not outcome.startswith("run_completed"):
                    raise RuntimeError(f"the benign model run ended {outcome}")
            stop = asyncio.Event()
            tripping = asyncio.create_task(trips.run(stop))
            await trips.enough.wait()
            idle = [end - start for start, end in trips.done[3:]]
            idle_median = statistics.median(idle)
            idle_rss, idle_redis = rss_kb(worker_pid), rss_kb(redis_pid)
            for attack in attacks:
                figures += await _measure(running, admin, hostile, agents[attack.path], attack, repeats, trips,
                                          (worker_pid, redis_pid), (idle_rss, idle_redis), idle_median)  # fmt: skip
            stop.set()
            await tripping
        finally:
            other.close()
    return figures


async def _measure(
    running: Cluster,
    admin: httpx.AsyncClient,
    hostile: str,
    agent_id: str,
    attack: _Attack,
    repeats: int,
    trips: _Trips,
    pids: tuple[int, int],
    idle: tuple[int, int],
    idle_median: float,
) -> list[Figure]:
    windows: list[tuple[float, float]] = []
    outcomes: list[str] = []
    cpu_before = cpu_seconds(pids[0])
    sampler = _Sampler(pids)
    with sampler.running():
        for _ in range(repeats):
            outcome, began, ended = await _run_once(running, admin, agent_id)
            outcomes.append(outcome)
            windows.append((began, ended))
        # A round trip that began during the last attack ends after it: waited for.
        await asyncio.sleep(0.2)
    cpu = cpu_seconds(pids[0]) - cpu_before
    during = trips.during(windows)
    async with httpx.AsyncClient() as client:
        stats = [s for s in (await client.get(f"{hostile}/stats")).json() if s["attack"] == attack.path]
    sent = max(float(s["bytes"]) for s in stats) / MB
    finished = sum(1 for s in stats if s["finished"])
    took = max(b - a for a, b in windows)
    worst = max(during) if during else 0.0
    median = statistics.median(during) if during else 0.0
    peak_mb = (sampler.peaks[0] - idle[0]) / 1024
    redis_mb = (sampler.peaks[1] - idle[1]) / 1024
    met = worst <= 2 * idle_median or worst <= 1.0
    ending, _, error = outcomes[0].partition(": ")
    note = (
        f"{ending} in {took:.2f} s ({error}); server sent {sent:.1f} of {attack.size:.0f} MB"
        f" ({finished} of {len(stats)} whole); worker CPU {cpu:.2f} s for {repeats}"
    )
    return [
        figure(SCENARIO, f"{attack.label}: worker peak RSS over idle", peak_mb, "MB", baseline=idle[0] / 1024,
               baseline_name="worker idle RSS", target="value <= 100", note=note),
        Figure(SCENARIO, f"{attack.label}: other session's round trip, worst", worst * 1000, "ms",
               baseline=idle_median * 1000, baseline_name="idle median", target="ratio <= 2 or value <= 1000",
               met=met, note=f"{len(during)} round trips during the attack, median {median * 1000:.0f} ms"),
        figure(SCENARIO, f"{attack.label}: Redis peak RSS over idle", redis_mb, "MB", baseline=idle[1] / 1024,
               baseline_name="Redis idle RSS"),
    ]  # fmt: skip
