"""Scenario 15: hostile MCP servers an agent's version grants (docs/mcp.md#limits), each the red team's:

- `keepalive`: 60 calls (one run) of a tool its server answers with a keep-alive comment every 3 s and
  never a result (the grant's `timeout_s` 25);
- `many_tools`: a `tools/list` of 100,000 tools (11.6 MB), listed by the steps of three sessions in a loop;
- `big_schemas`: 256 tools of 53 KB schemas, the same;
- `flood`: a GET stream of `notifications/message` without pause, while a call of the grant runs;
- `slow_pages`: a `tools/list` whose pages come 9.9 s apart, each with a next cursor, for fifty sessions
  of that agent at once (each step waits for the server's first list: one listing, within its 10 s);
- `big_answers`: 32 grants at 32 URLs of one host, each call (8 a grant) answered with 16 MB of text
  whose end is held back 30 s (the worker's budget of answers in flight holds two);
- `many_values`: 16 calls each answered with 16 MB of empty lists (a value every 3 bytes).

Under each, another session's plain round trip (input, a client tool call answered, the run's end),
measured sequentially, is held to 2x its idle figure or 1 s, whichever is larger (the idle figure
measured in the same run, before any attack); the worker's RSS at its peak to 300 MB above what it was
before that attack, and 60 s after the attack to 100 MB above it; during the flood the worker's CPU to
under 10% of a core, and from 5 s after the run's end (for 5 s) to what it uses idle (measured first)
plus 2% of a core; under `slow_pages` a waiting step to the listing's deadline (10 s) plus 2 s, and
another session's round trip the same (the fifty steps hold every job slot while they wait). Each
server runs as a process of its own (bench/hostile_servers.py), so what it costs is not counted against
the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from bench.calls import Session, kind, open_session, until
from bench.harness import Cluster, Figure, Size, cluster, cpu_seconds, figure, new_session, rss_kb, scripted_agent
from broker.transport.embedded import free_port

SCENARIO = "14 hostile MCP"
MODES = ("keepalive", "many_tools", "big_schemas", "flood", "slow_pages", "big_answers", "many_values")
# What a step needing a server's first list may wait for it: the listing's deadline (workers/mcp/hub.py).
_LISTING_S = 10.0


@dataclass(frozen=True)
class Plan:
    """The sizes of one run: round trips idle, each attack's window (s), the keep-alive calls and their
    timeout, the flood's call, how long after an attack its RSS is read, the CPU windows and how long after
    the flood's run the second begins, the sessions waiting for slow pages, and the grants and calls a grant
    of the large answers."""

    idle_trips: int
    window_s: float
    calls: int
    call_timeout_s: int
    flood_call_s: float
    settle_s: float
    quiet_s: float
    after_s: float = 5.0
    # A pause between the other session's round trips: none when judged (back to back, the most load the
    # attack meets); at smoke size they would keep a core busy for the whole run, beside CI's other tests.
    trip_gap_s: float = 0.0
    slow_sessions: int = 50
    big_grants: int = 32
    big_calls: int = 8
    big_hold_s: float = 30.0


def _plan(size: Size) -> Plan:
    return size.pick(
        smoke=Plan(
            idle_trips=3,
            window_s=1.5,
            calls=10,
            # Past the server's first keep-alive (3 s), which must not hold the call open.
            call_timeout_s=4,
            flood_call_s=2,
            settle_s=1,
            quiet_s=1,
            after_s=1,
            trip_gap_s=0.05,
            slow_sessions=5,
            # Twice the answers the worker's budget holds: half of them refused.
            big_grants=4,
            big_calls=1,
            big_hold_s=2,
        ),
        quick=Plan(idle_trips=10, window_s=12, calls=60, call_timeout_s=25, flood_call_s=10, settle_s=60, quiet_s=5),
        full=Plan(idle_trips=20, window_s=20, calls=60, call_timeout_s=25, flood_call_s=15, settle_s=60, quiet_s=5),
    )


@contextlib.contextmanager
def _server(mode: str, call_s: float = 0.0) -> Iterator[str]:
    """The hostile server `mode` as a process of its own; its endpoint URL."""
    port = free_port()
    args = [sys.executable, "-m", "bench.hostile_servers", mode, str(port)] + ([str(call_s)] if call_s else [])
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the hostile MCP server {mode} did not start")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _round_trip(session: Session) -> float:
    """One plain run of another session: a client tool call, answered; ms from the input to the run's end."""
    began = time.perf_counter()
    await session.send("/call client__web__x")
    got = await until(session.events, kind("client_tool_dispatched"))
    await session.answer(got.event["call_id"])
    await until(session.events, kind("run_completed"))
    return (time.perf_counter() - began) * 1000


async def _trips_while(session: Session, running: Callable[[], bool], gap_s: float) -> list[float]:
    trips = []
    while running():
        trips.append(await _round_trip(session))
        if gap_s:
            await asyncio.sleep(gap_s)
    return trips


class _Rss:
    """The worker's RSS, sampled every 50 ms while it runs: the peak (kB)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self.peak = rss_kb(pid)
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, rss_kb(self._pid))
            await asyncio.sleep(0.05)

    def __enter__(self) -> _Rss:
        self._task = asyncio.create_task(self._sample())
        return self

    def __exit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()


async def _run(
    admin: httpx.AsyncClient,
    session_id: str,
    token: str,
    text: str,
    expect: tuple[str, ...],
    timeout_s: float = 120,
    poll_s: float = 0.2,
) -> None:
    """Send `text` to a session and wait for its run to end (its log polled); every tool result of the run
    must hold one of `expect`, or the attack did not happen as meant (a server that could not be reached)."""
    headers = {"Authorization": f"Bearer {token}"}
    sent = await admin.post(f"/v1/sessions/{session_id}/events", json={"type": "input", "text": text}, headers=headers)
    sent.raise_for_status()
    run_id = sent.json()["run_id"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        page = await admin.get(
            f"/v1/sessions/{session_id}/events", params={"order": "desc", "limit": 200}, headers=headers
        )
        # Newest first, down to this run's start: the session runs nothing else meanwhile.
        events = []
        for event in page.json()["items"]:
            events.append(event)
            if event["type"] == "run_queued" and event.get("run_id") == run_id:
                break
        if any(
            e["type"] in ("run_completed", "run_failed", "run_cancelled") and e.get("run_id") == run_id for e in events
        ):
            said = [b["data"]["text"] for e in events if e["type"] == "tool_result" for b in e["content"]]
            if not said or any(not any(e in text for e in expect) for text in said):
                raise RuntimeError(f"the attack went otherwise: results {said[:3]}, expected {expect!r}")
            return
        await asyncio.sleep(poll_s)
    raise TimeoutError(f"the run {run_id} did not end within {timeout_s:g} s")


@dataclass
class _Attack:
    trips: list[float]
    rss_before_kb: int
    rss_peak_kb: int
    rss_after_kb: int
    cpu_during: float = 0.0
    cpu_after: float = 0.0
    waited_s: float = 0.0


async def _attack(
    worker_pid: int,
    other: Session,
    plan: Plan,
    harm: Callable[[], Coroutine[Any, Any, None]],
    *,
    window_s: float,
) -> _Attack:
    """Run `harm` while the other session makes round trips for `window_s` (or until `harm` ends, if sooner
    and after one trip at least), then wait out the harm and `plan.settle_s` for the RSS after."""
    before = rss_kb(worker_pid)
    with _Rss(worker_pid) as rss:
        harming = asyncio.create_task(harm())
        ends = time.monotonic() + window_s
        trips = await _trips_while(other, lambda: time.monotonic() < ends and not harming.done(), plan.trip_gap_s)
        await harming
    await asyncio.sleep(plan.settle_s)
    return _Attack(trips, before, rss.peak, rss_kb(worker_pid))


async def _agent(admin: httpx.AsyncClient, url: str, **grant: object) -> str:
    return await scripted_agent(admin, mcp=[{"name": "h", "url": url, "default_policy": "allow", **grant}])


async def _keepalive(admin: httpx.AsyncClient, pid: int, other: Session, plan: Plan) -> _Attack:
    with _server("keepalive") as url:
        agent_id = await _agent(admin, url, timeout_s=plan.call_timeout_s)
        session_id, token = await new_session(admin, agent_id)
        text = "\n".join(["/call mcp__h__wait"] * plan.calls)
        # Each call runs to its timeout or waits for a turn until then ("did not finish" / "did not start").
        expect = (f"within {plan.call_timeout_s} s",)
        harm = lambda: _run(admin, session_id, token, text, expect)  # noqa: E731
        return await _attack(pid, other, plan, harm, window_s=plan.window_s)


async def _listings(admin: httpx.AsyncClient, pid: int, other: Session, plan: Plan, mode: str) -> _Attack:
    with _server(mode) as url:
        agent_id = await _agent(admin, url)
        sessions = [await new_session(admin, agent_id) for _ in range(3)]
        ends = time.monotonic() + plan.window_s

        async def loop(session_id: str, token: str) -> None:
            # Each run's step lists the server's tools (again once a failure's 5 s have passed, or
            # a listing's 30 s).
            while time.monotonic() < ends:
                # The list refused (the server offers no tools), or taken.
                await _run(admin, session_id, token, "/call mcp__h__wait", ("no tool named mcp__h__wait", "done"))

        async def harm() -> None:
            await asyncio.gather(*(loop(*s) for s in sessions))

        return await _attack(pid, other, plan, harm, window_s=plan.window_s)


async def _flood(admin: httpx.AsyncClient, pid: int, other: Session, plan: Plan) -> _Attack:
    with _server("flood", plan.flood_call_s) as url:
        agent_id = await _agent(admin, url, timeout_s=int(plan.flood_call_s) + 30)
        # First the worker's CPU with nothing else running (another session's round trips cost it CPU of
        # their own): while a run's call keeps the grant in use, then from `after_s` after the run's end.
        session_id, token = await new_session(admin, agent_id)
        began, cpu = time.monotonic(), cpu_seconds(pid)
        await _run(admin, session_id, token, "/call mcp__h__wait", ("done",))
        during = (cpu_seconds(pid) - cpu) / (time.monotonic() - began)
        await asyncio.sleep(plan.after_s)
        cpu = cpu_seconds(pid)
        await asyncio.sleep(plan.quiet_s)
        after = (cpu_seconds(pid) - cpu) / plan.quiet_s
        # Then another session's round trips while a second run floods.
        session_id, token = await new_session(admin, agent_id)
        harm = lambda: _run(admin, session_id, token, "/call mcp__h__wait", ("done",))  # noqa: E731
        attack = await _attack(pid, other, plan, harm, window_s=plan.flood_call_s)
    attack.cpu_during, attack.cpu_after = during, after
    return attack


async def _slow_pages(admin: httpx.AsyncClient, pid: int, other: Session, plan: Plan) -> _Attack:
    with _server("slow_pages") as url:
        agent_id = await _agent(admin, url)
        sessions = [await new_session(admin, agent_id) for _ in range(plan.slow_sessions)]
        waited: list[float] = []

        async def step(session_id: str, token: str) -> None:
            began = time.monotonic()
            # The list is cut at its deadline, so the step has no such tool (before: the list was read
            # whole after ten pages, some 100 s, and the call answered).
            expect = ("no tool named mcp__h__wait", "done")
            await _run(admin, session_id, token, "/call mcp__h__wait", expect, timeout_s=300, poll_s=1.0)
            waited.append(time.monotonic() - began)

        async def harm() -> None:
            await asyncio.gather(*(step(*s) for s in sessions))

        attack = await _attack(pid, other, plan, harm, window_s=300)
    attack.waited_s = max(waited)
    return attack


async def _big_answers(admin: httpx.AsyncClient, pid: int, other: Session, plan: Plan) -> _Attack:
    with _server("big_answers", plan.big_hold_s) as url:
        grants = [
            {"name": f"h{n}", "url": f"{url}/{n}", "default_policy": "allow", "timeout_s": int(plan.big_hold_s) + 30}
            for n in range(plan.big_grants)
        ]
        agent_id = await scripted_agent(admin, mcp=grants)
        session_id, token = await new_session(admin, agent_id)
        text = "\n".join(f"/call mcp__h{n}__wait" for n in range(plan.big_grants) for _ in range(plan.big_calls))
        # Past the worker's budget an answer is refused; those within it are cut to a result's text.
        expect = ("in flight already", "x" * 100)
        harm = lambda: _run(admin, session_id, token, text, expect)  # noqa: E731
        return await _attack(pid, other, plan, harm, window_s=plan.window_s)


async def _many_values(admin: httpx.AsyncClient, pid: int, other: Session, plan: Plan) -> _Attack:
    with _server("many_values") as url:
        agent_id = await _agent(admin, url, timeout_s=60)
        session_id, token = await new_session(admin, agent_id)
        text = "\n".join(["/call mcp__h__wait"] * 16)
        harm = lambda: _run(admin, session_id, token, text, ("JSON values",))  # noqa: E731
        return await _attack(pid, other, plan, harm, window_s=plan.window_s)


def _figures(mode: str, attack: _Attack, idle_ms: float, limit_ms: float | None = None) -> list[Figure]:
    why = "2x idle or 1 s, the larger" if limit_ms is None else "a listing's deadline + 2 s"
    limit_ms = max(2 * idle_ms, 1000.0) if limit_ms is None else limit_ms
    worst = max(attack.trips)
    peak_mb = (attack.rss_peak_kb - attack.rss_before_kb) / 1024
    after_mb = (attack.rss_after_kb - attack.rss_before_kb) / 1024
    return [
        figure(SCENARIO, f"{mode}: another session's round trip, worst", worst, "ms", baseline=idle_ms,
               baseline_name="idle p50, same run", target=f"value <= {limit_ms:.0f}",
               note=f"{len(attack.trips)} trips; {why}"),
        figure(SCENARIO, f"{mode}: worker RSS at its peak, above before", peak_mb, "MB", target="value <= 300",
               note=f"before {attack.rss_before_kb / 1024:.0f} MB"),
        figure(SCENARIO, f"{mode}: worker RSS after the attack, above before", after_mb, "MB", target="value <= 100"),
    ]  # fmt: skip


async def _measure(running: Cluster, size: Size) -> list[Figure]:
    plan = _plan(size)
    worker_pid = running.processes.running[0].pid
    async with running.client() as admin:
        other = await open_session(running, admin, await scripted_agent(admin))
        try:
            await _round_trip(other)  # warm
            idle = sorted([await _round_trip(other) for _ in range(plan.idle_trips)])
            idle_ms = idle[len(idle) // 2]
            cpu = cpu_seconds(worker_pid)
            await asyncio.sleep(plan.quiet_s)
            idle_cpu = (cpu_seconds(worker_pid) - cpu) / plan.quiet_s
            figures: list[Figure] = [
                figure(SCENARIO, "idle: another session's round trip, p50", idle_ms, "ms"),
                figure(SCENARIO, "idle: worker CPU", idle_cpu * 100, "% of a core"),
            ]
            figures += _figures("keepalive", await _keepalive(admin, worker_pid, other, plan), idle_ms)
            for mode in ("many_tools", "big_schemas"):
                figures += _figures(mode, await _listings(admin, worker_pid, other, plan, mode), idle_ms)
            slow = await _slow_pages(admin, worker_pid, other, plan)
            slow_ms = (_LISTING_S + 2) * 1000
            figures += _figures("slow_pages", slow, idle_ms, slow_ms)
            figures.append(
                figure(SCENARIO, "slow_pages: a step waiting for the list, worst", slow.waited_s, "s",
                       target=f"value <= {_LISTING_S + 2:g}", note=f"{plan.slow_sessions} sessions at once")
            )  # fmt: skip
            figures += _figures("big_answers", await _big_answers(admin, worker_pid, other, plan), idle_ms)
            figures += _figures("many_values", await _many_values(admin, worker_pid, other, plan), idle_ms)
            flood = await _flood(admin, worker_pid, other, plan)
            figures += _figures("flood", flood, idle_ms)
            figures += [
                figure(SCENARIO, "flood: worker CPU while the grant is in use", flood.cpu_during * 100, "% of a core",
                       target="value < 10"),
                figure(SCENARIO, f"flood: worker CPU {plan.after_s:g} s after the run's end", flood.cpu_after * 100,
                       "% of a core",
                       baseline=idle_cpu * 100, baseline_name="idle", target=f"value <= {idle_cpu * 100 + 2:.1f}",
                       note="idle + 2% of a core"),
            ]  # fmt: skip
        finally:
            other.close()
    return figures


def run(size: Size) -> list[Figure]:
    # A deployment's defaults: the bench's 200 job slots would hide what slow calls take from the others.
    extra = {"SWITCHBOARD_PROVIDER_ALLOW_PRIVATE": "true", "SWITCHBOARD_WORKER_MAX_JOBS": "50"}
    with cluster(extra=extra) as running:
        return asyncio.run(_measure(running, size))
