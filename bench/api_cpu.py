"""Scenario 13: the API process's CPU per client call round trip, as a browser makes it, against a bare
uvicorn app answering the same two requests in the same run.

A browser's client (api/static/switchboard.js) acks each call it is dispatched and posts its result, one
call at a time: no burst, so no group commit forms (broker/scripts/batching.py). The requests are the
SDK's, byte for byte the same to both servers: `Authorization: Bearer <session token>`, a fresh
`Idempotency-Key`, and on the result `Content-Type: application/json` with `{"text": ...}`. The session has
one event stream reading it, as a page has, so the frames a call sends its reader are part of its cost.

The figure is the API's CPU from just before the ack is sent until the client holds the result's answer
and has read the call's `tool_result` frame; the input that starts each run and the model steps around
the call are outside it. The baseline (`bench.bare_api`: FastAPI, two trivial routes, served by uvicorn
with the API's own settings) is timed the same way over the same two requests from the same client, so
the client's cost is in neither. CPU is read per window from /proc/<pid>/task/*/schedstat (nanoseconds;
/proc's stat counts 10 ms ticks, longer than a window).

A server idle between requests spends more on each (its caches go cold while other processes run), so
the baseline is taken two ways in each round: each pair right after one of the API's calls, taking turns
(as idle as the API is between a browser's calls), and then the same pairs back to back (warm: the bare
app at its cheapest), 20 calls at a time. The target is held against the second, the harder one. Each
figure is the round with the median ratio.

The rate limit is on, set high enough never to refuse (the other scenarios turn it off, since their load
would trip it): a browser's requests go through it, so the figure pays for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.calls import Session, kind, until
from bench.harness import (
    Cluster,
    Figure,
    Size,
    calls_text,
    cluster,
    figure,
    keyed,
    registered,
    scripted_agent,
)
from bench.http import RawHttp
from bench.sse import RawStream
from broker.transport.embedded import free_port

BROWSER = {"SWITCHBOARD_RATE_LIMIT_PER_S": "1000000", "SWITCHBOARD_RATE_LIMIT_BURST": "1000000"}
RESULT = {"text": "ok"}
BLOCK = 20


def cpu_ns(pid: int, settle_s: float = 0.05) -> int:
    """CPU time of every thread of a process so far (ns), from the scheduler's own count, read once none
    of them is running (or after `settle_s`): a running thread's count lags until it stops, so a read
    while the server finishes a request would leave that work out of the window."""
    give_up = time.monotonic() + settle_s
    while True:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        states = []
        for task in tasks:
            with contextlib.suppress(FileNotFoundError):
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        if "R" not in states or time.monotonic() > give_up:
            break
    total = 0
    for task in tasks:
        with contextlib.suppress(FileNotFoundError):
            total += int((task / "schedstat").read_text().split()[0])
    return total


async def post(http: RawHttp, path: str, body: object = None) -> bytes:
    """One request as the SDK sends it (`RawHttp` adds `Content-Type: application/json` to a body)."""
    status, content = await http.request("POST", path, body, keyed())
    if status >= 300:
        raise RuntimeError(f"POST {path}: {status} {content[:200]!r}")
    return content


def call_paths(session: Session, call_id: str) -> tuple[str, str]:
    calls = f"/v1/sessions/{session.id}/clients/{session.client_id}/calls/{call_id}"
    return f"{calls}/ack", f"{calls}/result"


async def _api_call(pid: int, session: Session) -> int:
    """The API's CPU (ns) over one call's round trip, in a run of its own."""
    await session.send(calls_text(1))
    got = await until(session.events, kind("client_tool_dispatched"))
    ack, result = call_paths(session, got.event["call_id"])
    before = cpu_ns(pid)
    await post(session.http, ack)
    await post(session.http, result, RESULT)
    await until(session.events, kind("tool_result"))
    spent = cpu_ns(pid) - before
    await until(session.events, kind("run_completed"))
    return spent


async def bare_call(pid: int, http: RawHttp, session: Session, number: int) -> int:
    """The bare app's CPU (ns) over the same two requests from the same client."""
    ack, result = call_paths(session, f"call_{number:032x}")
    before = cpu_ns(pid)
    await post(http, ack)
    await post(http, result, RESULT)
    return cpu_ns(pid) - before


@dataclass(frozen=True, slots=True)
class Round:
    """µs per round trip over one round: the API's, the bare app's answering each pair right after the
    API's call (as idle between calls as the API is between a browser's), and the bare app's answering
    the same pairs back to back (its caches warm: its cheapest, so the ratio to it is the harder one)."""

    api: float
    paced: float
    back_to_back: float


async def _round(api_pid: int, session: Session, bare_pid: int, http: RawHttp, calls: int) -> Round:
    api = paced = back_to_back = 0
    # In blocks, so that a slow spell of the machine (it is shared) falls on all three alike.
    for first in range(0, calls, BLOCK):
        numbers = range(first, min(calls, first + BLOCK))
        for number in numbers:
            api += await _api_call(api_pid, session)
            paced += await bare_call(bare_pid, http, session, number)
        for number in numbers:
            back_to_back += await bare_call(bare_pid, http, session, number)
    return Round(api / calls / 1000, paced / calls / 1000, back_to_back / calls / 1000)


@contextlib.contextmanager
def bare_api() -> Iterator[tuple[int, str]]:
    """The baseline app in a process of its own: its pid and URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.bare_api", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the bare app did not start (exit {process.poll()})")
            time.sleep(0.05)
        yield process.pid, f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=20)


async def _measure(running: Cluster, bare: tuple[int, str], rounds: int, calls: int, warm: int) -> list[Round]:
    found: list[Round] = []
    async with running.client() as admin:
        party = await registered(running, admin, await scripted_agent(admin))
        # The default view, as the SDK's stream asks (no `?include=`).
        stream = await RawStream.open(running.url, party.id, party.token)
        session = Session(party.id, party.token, party.client_id, party.http, stream=stream)
        bare_pid, bare_url = bare
        http = RawHttp(bare_url, session.token)
        try:
            await _round(running.api_pid, session, bare_pid, http, warm)
            for _ in range(rounds):
                found.append(await _round(running.api_pid, session, bare_pid, http, calls))
        finally:
            http.close()
            session.close()
    return found


def _median(found: list[Round], baseline: Callable[[Round], float]) -> tuple[Round, str]:
    """The round with the median ratio of the API to `baseline`, and the spread of the ratios."""
    ordered = sorted(found, key=lambda r: r.api / baseline(r))
    low, high = (ordered[i].api / baseline(ordered[i]) for i in (0, -1))
    return ordered[len(ordered) // 2], f"median of {len(found)} rounds, ratio {low:.2f}x to {high:.2f}x"


def run(size: Size) -> list[Figure]:
    rounds, calls, warm = size.pick(smoke=(1, 20, 5), quick=(3, 200, 20), full=(7, 500, 50))
    with cluster(extra=BROWSER) as running, bare_api() as bare:
        found = asyncio.run(_measure(running, bare, rounds, calls, warm))
    tight, tight_spread = _median(found, lambda r: r.back_to_back)
    paced, paced_spread = _median(found, lambda r: r.paced)
    name = "per client call round trip (ack, result, their frames), 1 at a time"
    return [
        figure("13 API CPU", name, tight.api, "us", baseline=tight.back_to_back,
               baseline_name="bare FastAPI on uvicorn, the same two requests, pairs back to back",
               target="ratio <= 2", note=f"{tight_spread} of {calls} calls"),
        figure("13 API CPU", f"{name} (against a paced baseline)", paced.api, "us", baseline=paced.paced,
               baseline_name="the same bare app, each pair right after an API call",
               note=f"{paced_spread}; a server idle between requests spends more on each"),
    ]  # fmt: skip
