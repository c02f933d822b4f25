"""Load: 1,000 sessions with 4 ttl clients each (pinging at ttl/2), one event stream per session, and runs
of 2 parallel client calls started on idle sessions at a steady rate for a bounded time. Every call must be
dispatched once and answered once, no request may fail, and the API and worker must not grow while it
runs (their RSS early in the run against the end)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from bench import population
from bench.harness import Cluster, Figure, Size, cluster, enough_files, figure, keyed, rss_kb, scripted_agent, summary
from bench.http import RawHttp
from bench.sse import RawStream

TEXT = "/call client__tab__x\n/call client__tab-2__x"


@dataclass
class Tally:
    dispatched: Counter[str] = field(default_factory=Counter)
    results: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    round_trips: list[float] = field(default_factory=list)
    runs_started: int = 0
    runs_done: int = 0
    answering: set[asyncio.Task[None]] = field(default_factory=set)


async def _serve_session(
    running: Cluster, http: RawHttp, session: tuple[str, str], tally: Tally, idle: asyncio.Queue[tuple[str, str]]
) -> None:
    """Read one session's stream: answer each call (ack, then result) and hand the session back as idle
    when its run completes."""
    sid, token = session
    stream = await RawStream.open(running.url, sid, token)
    try:
        async for got in stream.events():
            event = got.event
            kind = event["type"]
            if kind == "client_tool_dispatched":
                tally.dispatched[event["call_id"]] += 1
                task = asyncio.create_task(
                    _answer(http, sid, token, event["client_id"], event["call_id"], got.at, tally)
                )
                tally.answering.add(task)
                task.add_done_callback(tally.answering.discard)
            elif kind == "tool_result":
                tally.results[event["call_id"]] += 1
            elif kind == "client_tool_failed":
                tally.failed += 1
            elif kind == "run_completed":
                tally.runs_done += 1
                idle.put_nowait(session)
    finally:
        stream.close()


async def _answer(http: RawHttp, sid: str, token: str, cid: str, call_id: str, seen: float, tally: Tally) -> None:
    path = f"/v1/sessions/{sid}/clients/{cid}/calls/{call_id}"
    status, content = await http.request("POST", f"{path}/ack", None, keyed(), token=token)
    if status != 200:
        tally.errors.append(f"ack {status}: {content[:120]!r}")
        return
    status, content = await http.request("POST", f"{path}/result", {"text": "ok"}, keyed(), token=token)
    if status != 204:
        tally.errors.append(f"result {status}: {content[:120]!r}")
        return
    tally.round_trips.append((time.time() - seen) * 1000)


async def _drive(
    http: RawHttp, idle: asyncio.Queue[tuple[str, str]], rate: float, seconds: float, tally: Tally
) -> None:
    """Start a run on an idle session `rate` times a second, for `seconds`."""
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        while tally.runs_started < int(elapsed * rate) and not idle.empty():
            sid, token = idle.get_nowait()
            status, content = await http.request(
                "POST", f"/v1/sessions/{sid}/events", {"type": "input", "text": TEXT}, keyed(), token=token
            )
            if status != 200:
                tally.errors.append(f"input {status}: {content[:120]!r}")
            tally.runs_started += 1
        await asyncio.sleep(0.01)


async def _load(running: Cluster, size: Size) -> list[Figure]:
    sessions_n, per_session = size.pick(smoke=(20, 4), quick=(200, 4), full=(1000, 4))
    seconds, rate = size.pick(smoke=(3.0, 10.0), quick=(20.0, 50.0), full=(60.0, 100.0))
    warm_s = size.pick(smoke=1.0, quick=5.0, full=5.0)
    http = RawHttp(running.url, running.key)
    tally = Tally()
    idle: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    async with running.client() as admin:
        agent_id = await scripted_agent(admin)
        opened = await population.sessions(admin, agent_id, sessions_n)
    clients = await population.register(http, opened, per_session)
    readers = [asyncio.create_task(_serve_session(running, http, s, tally, idle)) for s in opened]
    for session in opened:
        idle.put_nowait(session)
    worker_pid = next(p.pid for p in running.processes.running if p.pid != running.api_pid)
    pinging = asyncio.create_task(population.steady_pings(http, clients, seconds + warm_s))
    await asyncio.sleep(warm_s)  # warm up: streams open, pings under way
    rss_start = rss_kb(running.api_pid), rss_kb(worker_pid)
    await _drive(http, idle, rate, seconds, tally)
    rss_end = rss_kb(running.api_pid), rss_kb(worker_pid)
    ping_latencies, ping_rate = await pinging
    deadline = time.monotonic() + 30
    while tally.runs_done < tally.runs_started and time.monotonic() < deadline:  # noqa: ASYNC110 (a bench poll)
        await asyncio.sleep(0.1)
    for reader in readers:
        reader.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    http.close()
    lost = [c for c in tally.dispatched if tally.results[c] == 0]
    repeated = [c for c, n in tally.dispatched.items() if n > 1] + [c for c, n in tally.results.items() if n > 1]
    trip, pings = summary(tally.round_trips), summary(ping_latencies)
    shape = f"{sessions_n:,} sessions x {per_session} ttl clients, {seconds:g} s"
    requests = tally.runs_started + 2 * len(tally.dispatched) + len(ping_latencies)
    return [
        figure("7 load", "runs completed", tally.runs_done, "", note=f"of {tally.runs_started} started; {shape}"),
        figure("7 load", "calls answered", len(tally.results), "",
               note=f"{len(tally.dispatched) / seconds:.0f} calls/s"),
        figure("7 load", "calls lost or repeated", len(lost) + len(repeated), "", target="value <= 0",
               note=f"{len(lost)} lost, {len(repeated)} repeated, {tally.failed} failed"),
        figure("7 load", "failed requests", len(tally.errors), "", target="value <= 0",
               note=f"of about {requests:,}" + (f"; first: {tally.errors[0]}" if tally.errors else "")),
        figure("7 load", "call round trip p50 / p99", trip["p50"], "ms", note=f"p99 {trip['p99']:.1f} ms"),
        figure("7 load", "ping p50 / p99", pings["p50"], "ms", note=f"p99 {pings['p99']:.1f} ms, {ping_rate:.0f}/s"),
        figure("7 load", "API RSS growth over the run", (rss_end[0] - rss_start[0]) / 1024, "MiB",
               note=f"{rss_start[0] / 1024:.0f} -> {rss_end[0] / 1024:.0f} MiB"),
        figure("7 load", "worker RSS growth over the run", (rss_end[1] - rss_start[1]) / 1024, "MiB",
               note=f"{rss_start[1] / 1024:.0f} -> {rss_end[1] / 1024:.0f} MiB"),
    ]  # fmt: skip


def run(size: Size) -> list[Figure]:
    enough_files(1000 + 500)
    with cluster() as running:
        return asyncio.run(_load(running, size))
