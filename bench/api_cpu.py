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
/proc's stat counts 10 ms ticks, longer than a window). Rounds alternate between the two servers, so a
busy moment of the machine falls on both; the ratio is the median round's.

The rate limit is on, set high enough never to refuse (the other scenarios turn it off, since their load
would trip it): a browser's requests go through it, so the figure pays for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
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
    percentile,
    registered,
    scripted_agent,
)
from bench.http import RawHttp
from bench.sse import RawStream
from broker.transport.embedded import free_port

BROWSER = {"SWITCHBOARD_RATE_LIMIT_PER_S": "1000000", "SWITCHBOARD_RATE_LIMIT_BURST": "1000000"}
RESULT = {"text": "ok"}


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


async def _post(http: RawHttp, path: str, body: object = None) -> bytes:
    """One request as the SDK sends it (`RawHttp` adds `Content-Type: application/json` to a body)."""
    status, content = await http.request("POST", path, body, keyed())
    if status >= 300:
        raise RuntimeError(f"POST {path}: {status} {content[:200]!r}")
    return content


def _paths(session: Session, call_id: str) -> tuple[str, str]:
    calls = f"/v1/sessions/{session.id}/clients/{session.client_id}/calls/{call_id}"
    return f"{calls}/ack", f"{calls}/result"


async def _api_round(pid: int, session: Session, calls: int) -> float:
    """The API's CPU per call round trip (µs) over `calls` runs of one call each."""
    spent = 0
    for _ in range(calls):
        await session.send(calls_text(1))
        got = await until(session.events, kind("client_tool_dispatched"))
        ack, result = _paths(session, got.event["call_id"])
        before = cpu_ns(pid)
        await _post(session.http, ack)
        await _post(session.http, result, RESULT)
        await until(session.events, kind("tool_result"))
        spent += cpu_ns(pid) - before
        await until(session.events, kind("run_completed"))
    return spent / calls / 1000


async def _bare_round(pid: int, http: RawHttp, session: Session, calls: int) -> float:
    """The bare app's CPU per ack and result (µs), the same requests from the same client."""
    spent = 0
    for number in range(calls):
        ack, result = _paths(session, f"call_{number:032x}")
        before = cpu_ns(pid)
        await _post(http, ack)
        await _post(http, result, RESULT)
        spent += cpu_ns(pid) - before
    return spent / calls / 1000


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


async def _measure(
    running: Cluster, bare: tuple[int, str], rounds: int, calls: int, warm: int
) -> list[tuple[float, float]]:
    """(API µs, bare app µs) per round trip, round by round."""
    found: list[tuple[float, float]] = []
    async with running.client() as admin:
        party = await registered(running, admin, await scripted_agent(admin))
        # The default view, as the SDK's stream asks (no `?include=`).
        stream = await RawStream.open(running.url, party.id, party.token)
        session = Session(party.id, party.token, party.client_id, party.http, stream=stream)
        bare_pid, bare_url = bare
        http = RawHttp(bare_url, session.token)
        try:
            await _api_round(running.api_pid, session, warm)
            await _bare_round(bare_pid, http, session, warm)
            for _ in range(rounds):
                api = await _api_round(running.api_pid, session, calls)
                found.append((api, await _bare_round(bare_pid, http, session, calls)))
        finally:
            http.close()
            session.close()
    return found


def run(size: Size) -> list[Figure]:
    rounds, calls, warm = size.pick(smoke=(1, 20, 5), quick=(3, 200, 20), full=(7, 500, 50))
    with cluster(extra=BROWSER) as running, bare_api() as bare:
        found = asyncio.run(_measure(running, bare, rounds, calls, warm))
    ratios = sorted(api / baseline for api, baseline in found)
    middle = found[[api / baseline for api, baseline in found].index(percentile(ratios, 50))]
    spread = f"ratio {ratios[0]:.2f}x to {ratios[-1]:.2f}x over {len(found)} rounds of {calls}"
    return [
        figure("13 API CPU", "per client call round trip (ack + result + its frames), 1 at a time",
               middle[0], "us", baseline=middle[1],
               baseline_name="bare FastAPI on uvicorn, the same two requests", target="ratio <= 2",
               note=f"median round; {spread}; cpus {os.cpu_count()}"),
    ]  # fmt: skip
