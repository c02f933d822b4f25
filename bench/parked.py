"""Scenario 18 `parked`: what a run that waits costs while it waits (docs/parked-work.md).

N sessions on one Redis (smoke 200, quick 20,000, full 100,000), each with a run parked: half on an
approval (the server tool `calculate` under `require_approval`), half on a client call dispatched to a
registration, acked and not answered (its tool's timeout_s is 30 days). Figures:

- Redis memory per parked run, its session included: used_memory with them all, less the deployment's
  before the first, over N;
- the deployment's idle Redis CPU with them all parked, next to the same deployment before the first was
  made (measured in the same run, each over the same window);
- a decision to the next step starting, with all of them parked: an approval denied over HTTP (the POST
  sent) to the `started_at_us` of the step it lets run (its timing event);
- the API's and the worker's RSS with all of them parked, next to the same with half of them parked
  (flat: the second half adds nothing a process keeps; the first fills its bounded caches and takes
  its allocator to the high-water mark of making runs, and the RSS before any is noted).

Creating them goes through the API (as a deployment's users would), many requests in flight; the
worker runs each session's first step.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, replace
from typing import Any

from redis.asyncio import Redis

from bench.harness import (
    BENCH_SETTINGS,
    Cluster,
    Figure,
    Size,
    cluster,
    figure,
    keyed,
    redis_cpu_s,
    rss_kb,
    scripted_agent,
    summary,
)
from bench.http import RawHttp
from broker.transport.embedded import RECOMMENDED_OPTIONS

SCENARIO = "18 parked"
CONCURRENCY = 96
# Sessions started before their parked calls are read: well within the ack deadline's reach.
CHUNK = 2000
# A call a tab took and works on for weeks: acked, its tool's own deadline 30 days.
LONG_TOOL = {
    "name": "sign",
    "description": "Ask the user to sign",
    "parameters": {"type": "object"},
    "timeout_s": 2_592_000,
}
# Redis's own defaults for the settings docs/operating.md recommends, for the figure without them.
SERVER_DEFAULTS = ("--stream-node-max-bytes", "4096", "--hash-max-listpack-value", "64")
APPROVAL_TEXT = '/call calculate {"expression": "6*7"}'
CALL_TEXT = "/call client__web__sign"


@dataclass(frozen=True)
class Parked:
    session_id: str
    token: str
    call_id: str
    kind: str  # 'approval' | 'call'


def _ok(status: int, content: bytes, what: str) -> Any:
    if status >= 300:
        raise RuntimeError(f"{what}: {status} {content[:300]!r}")
    return json.loads(content) if content else None


async def _waiting_call(http: RawHttp, session_id: str, token: str, kind: str) -> str:
    """The call the session's first step parked (its approval_requested or client_tool_dispatched)."""
    wanted = "approval_requested" if kind == "approval" else "client_tool_dispatched"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        path = f"/v1/sessions/{session_id}/events?order=asc&limit=50"
        status, content = await http.request("GET", path, token=token)
        for event in _ok(status, content, "events")["items"]:
            if event["type"] == wanted:
                return str(event["call_id"])
        await asyncio.sleep(0.1)
    raise RuntimeError(f"session {session_id}: no {wanted} within 120 s")


@dataclass(frozen=True)
class _Started:
    session_id: str
    token: str
    client_id: str
    kind: str


async def _start_one(http: RawHttp, agents: dict[str, str], kind: str) -> _Started:
    """A session whose first run was asked for: its step is the worker's from here."""
    status, content = await http.request("POST", "/v1/sessions", {"agent_id": agents[kind]}, keyed())
    created = _ok(status, content, "session")
    session_id, token = created["id"], created["session_token"]
    client_id = ""
    if kind == "call":
        body = {"name": "web", "lifetime": {"type": "never"}, "tools": [LONG_TOOL]}
        status, content = await http.request("POST", f"/v1/sessions/{session_id}/clients", body, keyed(), token=token)
        client_id = _ok(status, content, "register")["id"]
    text = APPROVAL_TEXT if kind == "approval" else CALL_TEXT
    status, content = await http.request(
        "POST", f"/v1/sessions/{session_id}/events", {"type": "input", "text": text}, keyed(), token=token
    )
    _ok(status, content, "input")
    return _Started(session_id, token, client_id, kind)


async def _parked(http: RawHttp, started: _Started) -> Parked:
    """The started session once its step parked the run (a call acked, as the tab that took it would)."""
    call_id = await _waiting_call(http, started.session_id, started.token, started.kind)
    if started.kind == "call":
        path = f"/v1/sessions/{started.session_id}/clients/{started.client_id}/calls/{call_id}/ack"
        status, content = await http.request("POST", path, None, keyed(), token=started.token)
        _ok(status, content, "ack")
    return Parked(started.session_id, started.token, call_id, started.kind)


async def _each(count: int, work: Any) -> list[Any]:
    """`work(n)` for n below `count`, CONCURRENCY at a time, in order."""
    done: list[Any] = [None] * count
    todo = list(range(count))

    async def worker() -> None:
        while todo:
            n = todo.pop()
            done[n] = await work(n)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done


async def park(http: RawHttp, agents: dict[str, str], count: int) -> list[Parked]:
    """`count` sessions each with a parked run, half of each kind: a chunk's sessions and inputs first
    (the worker's steps run meanwhile), then each one's parked call read (and acked) in one pass."""
    parked: list[Parked] = []
    for first in range(0, count, CHUNK):
        size = min(CHUNK, count - first)
        started: list[_Started] = await _each(
            size, lambda n: _start_one(http, agents, "approval" if n % 2 == 0 else "call")
        )
        parked += await _each(size, lambda n, chunk=started: _parked(http, chunk[n]))
    return parked


async def _step_started_us(http: RawHttp, parked: Parked, after_seq: int) -> int:
    """When the step after `after_seq` started (its timing's started_at_us). Read after a pause and then
    seldom: the reads would otherwise take the cores the worker starts that step on."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        path = f"/v1/sessions/{parked.session_id}/events?order=asc&limit=50&include=timing&after_seq={after_seq}"
        status, content = await http.request("GET", path, token=parked.token)
        for event in _ok(status, content, "events")["items"]:
            data = event.get("payload") if event["type"] == "custom" else None
            if isinstance(data, dict) and data.get("scope") == "step" and "started_at_us" in data:
                return int(data["started_at_us"])
    raise RuntimeError(f"session {parked.session_id}: no step began after the decision")


async def decisions(http: RawHttp, approvals: list[Parked]) -> list[float]:
    """Deny each approval, one after another, and how long (ms) until the next step started."""
    taken: list[float] = []
    for parked in approvals:
        sent = time.time()
        status, content = await http.request(
            "POST",
            f"/v1/sessions/{parked.session_id}/approvals/{parked.call_id}",
            {"decision": "deny", "message": "not now"},
            keyed(),
            token=parked.token,
        )
        resolved = _ok(status, content, "decision")
        started_us = await _step_started_us(http, parked, int(resolved["seq"]))
        taken.append(started_us / 1000 - sent * 1000)
    return taken


async def _stream_share(url: str, sample: list[Parked]) -> float:
    """The share of a parked session's keys (MEMORY USAGE, summed over `sample`) its streams hold: the
    event log and a registration's call stream. SCAN is fine here: a benchmark, not a request path."""
    redis = Redis.from_url(url)
    streams = total = 0
    try:
        for parked in sample:
            async for key in redis.scan_iter(match=f"*:s:{parked.session_id}:*", count=10_000):
                used = int(await redis.memory_usage(key, samples=0) or 0)
                total += used
                if await redis.type(key) == b"stream":
                    streams += used
    finally:
        await redis.aclose()
    return streams / total if total else 0.0


async def _used_memory(url: str) -> int:
    redis = Redis.from_url(url)
    try:
        return int((await redis.info("memory"))["used_memory"])
    finally:
        await redis.aclose()


async def _idle_cpu_per_s(running: Cluster, window_s: float) -> float:
    before = await redis_cpu_s(running.redis)
    await asyncio.sleep(window_s)
    return (await redis_cpu_s(running.redis) - before) / window_s


def _worker_pid(running: Cluster) -> int:
    return next(p.pid for p in running.processes.running if p.pid != running.api_pid)


@dataclass(frozen=True)
class _Shape:
    sessions: int
    idle_s: float
    settle_s: float
    decisions: int


async def _agents(running: Cluster) -> dict[str, str]:
    async with running.client() as admin:
        return {
            "approval": await scripted_agent(
                admin, server_tools=["calculate"], server_tool_policies={"calculate": "require_approval"}
            ),
            "call": await scripted_agent(admin),
        }


async def _memory_only(running: Cluster, shape: _Shape) -> float:
    """Redis memory per parked run (KiB), as _measure takes it, and nothing else."""
    http = RawHttp(running.url, running.key)
    try:
        agents = await _agents(running)
        await park(http, agents, 4)
        await asyncio.sleep(shape.settle_s)
        before = await _used_memory(running.redis.url)
        await park(http, agents, shape.sessions)
        await asyncio.sleep(shape.settle_s)
        return (await _used_memory(running.redis.url) - before) / shape.sessions / 1024
    finally:
        http.close()


async def _measure(running: Cluster, shape: _Shape) -> list[Figure]:
    http = RawHttp(running.url, running.key)
    worker = _worker_pid(running)
    try:
        agents = await _agents(running)
        # Warm: the processes' first requests and steps, before anything is read.
        await park(http, agents, 4)
        await asyncio.sleep(shape.settle_s)
        empty_cpu = await _idle_cpu_per_s(running, shape.idle_s)
        memory_before = await _used_memory(running.redis.url)
        api_before, worker_before = rss_kb(running.api_pid), rss_kb(worker)
        # Parked in two halves: what a process holds after the first (its caches filled to their bounds,
        # its allocator's high-water mark from making runs reached) is what the second is set against.
        started = time.monotonic()
        half = shape.sessions // 2
        parked = await park(http, agents, half)
        await asyncio.sleep(shape.settle_s)
        api_half, worker_half = rss_kb(running.api_pid), rss_kb(worker)
        parked += await park(http, agents, shape.sessions - half)
        took = time.monotonic() - started - shape.settle_s
        await asyncio.sleep(shape.settle_s)
        memory_after = await _used_memory(running.redis.url)
        parked_cpu = await _idle_cpu_per_s(running, shape.idle_s)
        api_after, worker_after = rss_kb(running.api_pid), rss_kb(worker)
        streams = await _stream_share(running.redis.url, parked[:20])
        approvals = [p for p in parked if p.kind == "approval"][: shape.decisions]
        taken = await decisions(http, approvals)
    finally:
        http.close()
    per_run = (memory_after - memory_before) / shape.sessions / 1024
    stats = summary(taken)
    return [
        figure(SCENARIO, "Redis memory per parked run (session included)", per_run, "KiB", target="value <= 8",
               note=f"{shape.sessions:,} parked, half on an approval, half on an acked call; streams hold "
               f"{streams * 100:.0f}% of a session's keys"),
        figure(SCENARIO, "idle Redis CPU, all parked", parked_cpu * 1000, "ms/s", baseline=empty_cpu * 1000,
               baseline_name="the same deployment before any was parked", target="ratio <= 1.25"),
        figure(SCENARIO, "decision to the next step starting, p99", stats["p99"], "ms", target="value < 10",
               note=f"p50 {stats['p50']:.2f} ms over {len(taken)} denials, all parked"),
        figure(SCENARIO, "API RSS, all parked", api_after / 1024, "MiB", baseline=api_half / 1024,
               baseline_name="half of them parked", target="ratio <= 1.05",
               note=f"{api_before / 1024:.1f} MiB before any was parked"),
        figure(SCENARIO, "worker RSS, all parked", worker_after / 1024, "MiB", baseline=worker_half / 1024,
               baseline_name="half of them parked", target="ratio <= 1.05",
               note=f"{worker_before / 1024:.1f} MiB before any was parked; its transcript cache lets a conversation "
               "go SWITCHBOARD_WORKER_TRANSCRIPT_IDLE_S after its step; what each process keeps: "
               "python -m bench.parked_memory"),
        figure(SCENARIO, "parked runs made per second", shape.sessions / took, "/s",
               note="session, input, the worker's step (and for a call: registration, ack), over HTTP"),
    ]  # fmt: skip


# What the last sessions made leave behind for a while, which the idle windows wait out: their calls' ack
# deadlines (the bench's SWITCHBOARD_ACK_TIMEOUT_S, moved on by the ack but leaving the partition's alarm
# where it was, so each rings once as a sweep with nothing due), their step leases and work claims (10 s),
# and the worker's folded conversations (SWITCHBOARD_WORKER_TRANSCRIPT_IDLE_S, 60 s). A deployment whose
# runs are all parked has none of them.
_SETTLE_S = max(float(BENCH_SETTINGS["SWITCHBOARD_ACK_TIMEOUT_S"]), 60.0) + 5.0


def run(size: Size) -> list[Figure]:
    # The worker's rescan of its partitions (SWITCHBOARD_RESCAN_INTERVAL_S) comes every 300 s, longer than
    # an idle window: one window may hold one (the parked one reads keys that exist, a few ms of Redis),
    # and its figure then says so by being the higher. BENCH_PARKED_SESSIONS sets how many are parked (a
    # quicker look at the quick size's figures).
    shape = size.pick(
        smoke=_Shape(200, idle_s=1.0, settle_s=1.0, decisions=20),
        quick=_Shape(20_000, idle_s=60.0, settle_s=_SETTLE_S, decisions=200),
        full=_Shape(100_000, idle_s=90.0, settle_s=_SETTLE_S, decisions=500),
    )
    if os.environ.get("BENCH_PARKED_SESSIONS"):
        shape = replace(shape, sessions=int(os.environ["BENCH_PARKED_SESSIONS"]))
    first_reads = size.pick(smoke=1, quick=3, full=3)  # the worker's first reads of its partitions
    # The server as docs/operating.md recommends it (every embedded one runs so: RECOMMENDED_OPTIONS).
    with cluster() as running:
        time.sleep(first_reads)
        figures = asyncio.run(_measure(running, shape))
    # The same runs on a server left at Redis's defaults, memory only: what the settings are worth.
    with cluster(redis_options=SERVER_DEFAULTS) as running:
        time.sleep(first_reads)
        per_run = asyncio.run(_memory_only(running, shape))
    return [
        *figures,
        figure(SCENARIO, "Redis memory per parked run, server defaults", per_run, "KiB",
               note=f"{shape.sessions:,} parked as above, {_settings(SERVER_DEFAULTS)} (Redis's defaults) rather "
               f"than the recommended {_settings(RECOMMENDED_OPTIONS)}"),
    ]  # fmt: skip


def _settings(options: tuple[str, ...]) -> str:
    return ", ".join(f"{options[i].removeprefix('--')} {options[i + 1]}" for i in range(0, len(options), 2))
