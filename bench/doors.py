"""Scenario 16, doors: the API process's CPU per refused front door body, against a plain `/events` body of
the same byte size refused the same way (a 400 before anything is written: its text is past 262,144
characters) in the same run; and another session's requests while four senders post such bodies, against
idle.

The bodies:
- the red team's: AG-UI, one user message and 11,000 tool messages (781 KB; 60 ms of CPU before its 400);
- the AI SDK's equivalent: one assistant message holding 9,000 tool outputs (781 KB);
- just too large, the dearest a door's bounds refuse: AG-UI one message past the bound on messages
  (4,097, 781 KB);
- beside them, not held to the target: AG-UI whose newest message is one character past the input limit
  (262 KB). The door reads that text twice, once past it to find where the conversation ends and once
  into the input it would be; `/events` reads it once with a decoder half as fast: they come out even.
A body past SWITCHBOARD_MAX_BODY_BYTES (1 MiB) is not among them: one middleware refuses it, 413 and
unread, on every route alike.

CPU is read from /proc per block of requests (`bench.api_cpu.cpu_ns`); door and `/events` blocks take
turns, each first in every other round, so a slow spell of the shared machine falls on both. Each figure
is the round with the median ratio. The senders run in a process of their own (`python -m bench.doors`),
each with a session of its own, back to back, so the client measuring another session's requests (a page
of its log, one at a time) shares no event loop with them; they send `/events` bodies of the same size in
a second run, for comparison. The figure is the p50 (the red team's 4 ms went to 160 ms), p90 and p99
beside it; none is held to a target: on a machine other work shares, a tail is mostly that work.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.api_cpu import cpu_ns
from bench.harness import Cluster, Figure, Size, cluster, figure, new_session, percentile, scripted_agent
from bench.http import RawHttp

SENDERS = 4
RED_TEAM_BYTES = 780_935
INPUT_LIMIT = 262_144
_EVENTS_SHELL = len(json.dumps({"type": "input", "text": ""}).encode())


@dataclass(frozen=True, slots=True)
class Case:
    """A door body the door refuses (400), and where it goes."""

    name: str
    door: str
    body: bytes
    # Held to `ratio <= 1` (the bodies); otherwise reported beside them.
    judged: bool = True
    note: str = ""

    def path(self, session_id: str) -> str:
        return f"/v1/sessions/{session_id}/{self.door}"

    def events_body(self) -> bytes:
        """A plain `/events` input of the same byte size (refused: past INPUT_LIMIT characters)."""
        plain = json.dumps({"type": "input", "text": "x" * (len(self.body) - _EVENTS_SHELL)}).encode()
        assert len(plain) == len(self.body)
        return plain


def _encoded(value: object) -> bytes:
    """As the browser clients' JSON.stringify would, spaced as Python's json writes it (the 781 KB measured)."""
    return json.dumps(value).encode()


def _run_input(messages: list[dict[str, str]]) -> bytes:
    return _encoded({"threadId": "t", "runId": "r", "messages": messages})


def _tool_message(number: int, content: str = "k") -> dict[str, str]:
    return {"id": str(number), "role": "tool", "toolCallId": f"c{number}", "content": content}


def ag_ui_tool_messages() -> Case:
    messages = [{"id": "u1", "role": "user", "content": "hi"}] + [_tool_message(n) for n in range(11_000)]
    return Case("AG-UI, 1 user message and 11,000 tool messages", "ag-ui", _run_input(messages))


def ai_sdk_tool_outputs() -> Case:
    parts = [
        {"type": "tool-t", "toolCallId": f"c{n}", "state": "output-available", "output": "k"} for n in range(9_000)
    ]
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    body = {"id": "c", "messages": [user, {"id": "a", "role": "assistant", "parts": parts}]}
    return Case("AI SDK, 1 assistant message of 9,000 tool outputs", "ai-sdk/chat", _encoded(body))


def ag_ui_one_message_too_many() -> Case:
    messages = [_tool_message(n, "k" * 121) for n in range(4_097)]
    return Case("AG-UI, 4,097 messages (one past the bound)", "ag-ui", _run_input(messages))


def ag_ui_input_too_long() -> Case:
    messages = [{"id": "u1", "role": "user", "content": "x" * (INPUT_LIMIT + 1)}]
    # The door reads the text twice (past it, to find the conversation's end; then into the input it
    # would be) and /events once with a decoder half as fast: the two come out even.
    note = "not judged: at parity by design"
    return Case("AG-UI, input one character past the limit", "ag-ui", _run_input(messages), judged=False, note=note)


@dataclass(frozen=True, slots=True)
class Round:
    """µs of the API's CPU per request over one round: the door body's, the `/events` body's."""

    door: float
    events: float


async def _cpu_us(pid: int, http: RawHttp, path: str, body: bytes, count: int) -> float:
    before = cpu_ns(pid)
    for _ in range(count):
        status, content = await http.request("POST", path, body)
        if status != 400:
            raise RuntimeError(f"POST {path}: {status} {content[:200]!r}, not the 400 measured")
    return (cpu_ns(pid) - before) / count / 1000


async def _rounds(running: Cluster, http: RawHttp, session_id: str, case: Case, rounds: int, block: int) -> list[Round]:
    door, events = (case.path(session_id), case.body), (f"/v1/sessions/{session_id}/events", case.events_body())
    for path, body in (door, events):
        await _cpu_us(running.api_pid, http, path, body, block)
    found = []
    for number in range(rounds):
        if number % 2:
            spent_events = await _cpu_us(running.api_pid, http, *events, block)
            spent_door = await _cpu_us(running.api_pid, http, *door, block)
        else:
            spent_door = await _cpu_us(running.api_pid, http, *door, block)
            spent_events = await _cpu_us(running.api_pid, http, *events, block)
        found.append(Round(spent_door, spent_events))
    return found


def _median(found: list[Round]) -> tuple[Round, str]:
    ordered = sorted(found, key=lambda r: r.door / r.events)
    low, high = (ordered[i].door / ordered[i].events for i in (0, -1))
    return ordered[len(ordered) // 2], f"median of {len(found)} rounds, ratio {low:.2f}x to {high:.2f}x"


async def _latencies(http: RawHttp, path: str, seconds: float) -> list[float]:
    """Another session's requests (a page of its log), one at a time, for `seconds`: ms each."""
    found = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        began = time.perf_counter()
        status, content = await http.request("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {content[:200]!r}")
        found.append((time.perf_counter() - began) * 1000)
        await asyncio.sleep(0.005)
    return found


async def _under_senders(
    running: Cluster, senders: list[tuple[str, str]], path: Callable[[str], str], body: bytes, victim: RawHttp,
    victim_path: str, seconds: float,
) -> tuple[list[float], int]:  # fmt: skip
    """The victim's latencies while the senders post `body` back to back (from `python -m bench.doors`), and
    how many requests they made."""
    with tempfile.NamedTemporaryFile(suffix=".json") as written:
        written.write(body)
        written.flush()
        plan = {
            "url": running.url,
            "body": written.name,
            "targets": [[path(sid), token] for sid, token in senders],
            "seconds": seconds + 1.0,
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.doors", json.dumps(plan), stdout=asyncio.subprocess.PIPE
        )
        await asyncio.sleep(0.5)
        found = await _latencies(victim, victim_path, seconds)
        out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the senders failed (exit {process.returncode})")
    return found, int(out.decode().strip() or 0)


@dataclass(frozen=True, slots=True)
class Latency:
    idle: list[float]
    doors: list[float]
    events: list[float]
    sent_doors: int
    sent_events: int


async def _latency(running: Cluster, agent_id: str, case: Case, seconds: float) -> Latency:
    async with running.client() as admin:
        victim_id, victim_token = await new_session(admin, agent_id)
        senders = [await new_session(admin, agent_id) for _ in range(SENDERS)]
    victim = RawHttp(running.url, victim_token)
    victim_path = f"/v1/sessions/{victim_id}/events?limit=1"
    try:
        idle = await _latencies(victim, victim_path, seconds)
        doors, sent_doors = await _under_senders(running, senders, case.path, case.body, victim, victim_path, seconds)
        events, sent_events = await _under_senders(
            running, senders, lambda sid: f"/v1/sessions/{sid}/events", case.events_body(), victim, victim_path, seconds
        )
    finally:
        victim.close()
    return Latency(idle, doors, events, sent_doors, sent_events)


def run(size: Size) -> list[Figure]:
    rounds, block, seconds = size.pick(smoke=(1, 3, 1.0), quick=(5, 30, 3.0), full=(9, 60, 5.0))
    cases = [ag_ui_tool_messages(), ai_sdk_tool_outputs(), ag_ui_one_message_too_many(), ag_ui_input_too_long()]
    figures = []
    with cluster() as running:

        async def measure() -> tuple[list[list[Round]], Latency]:
            async with running.client() as admin:
                agent_id = await scripted_agent(admin)
                session_id, token = await new_session(admin, agent_id)
            http = RawHttp(running.url, token)
            try:
                found = [await _rounds(running, http, session_id, case, rounds, block) for case in cases]
            finally:
                http.close()
            return found, await _latency(running, agent_id, cases[0], seconds)

        found, latency = asyncio.run(measure())
    for case, measured in zip(cases, found, strict=True):
        middle, ratios = _median(measured)
        figures.append(
            figure("doors", f"API CPU per refused body: {case.name} ({len(case.body) / 1000:,.0f} KB)", middle.door,
                   "us", baseline=middle.events, baseline_name="a plain /events body of that size, refused (400)",
                   target="ratio <= 1" if case.judged else "",
                   note="; ".join(filter(None, [f"{ratios} of {block} requests each", case.note])))
        )  # fmt: skip
    rate = seconds + 1

    def tails(found: list[float]) -> str:
        return f"p90 {percentile(found, 90):.1f} ms, p99 {percentile(found, 99):.1f} ms"

    figures += [
        figure("doors", f"another session's request p50, {SENDERS} senders of the AG-UI body",
               percentile(latency.doors, 50), "ms", baseline=percentile(latency.idle, 50), baseline_name="idle",
               note=f"{tails(latency.doors)} (idle {tails(latency.idle)}); "
                    f"{latency.sent_doors / rate:,.0f} bodies/s refused"),
        figure("doors", f"the same, {SENDERS} senders of the /events body of that size",
               percentile(latency.events, 50), "ms", baseline=percentile(latency.idle, 50), baseline_name="idle",
               note=f"{tails(latency.events)}; {latency.sent_events / rate:,.0f} bodies/s refused; "
                    f"{len(latency.idle)} idle and {statistics.median([len(latency.doors), len(latency.events)]):.0f} "
                    "loaded requests"),
    ]  # fmt: skip
    return figures


async def _send(plan: dict[str, object], body: bytes) -> int:
    """`python -m bench.doors PLAN`: post the body to each target, back to back, until the time is up."""
    until = time.monotonic() + float(str(plan["seconds"]))
    sent = 0

    async def sender(path: str, token: str) -> None:
        nonlocal sent
        http = RawHttp(str(plan["url"]), token)
        try:
            while time.monotonic() < until:
                await http.request("POST", path, body)
                sent += 1
        finally:
            http.close()

    targets = plan["targets"]
    assert isinstance(targets, list)
    await asyncio.gather(*(sender(path, token) for path, token in targets))
    return sent


if __name__ == "__main__":
    _plan = json.loads(sys.argv[1])
    print(asyncio.run(_send(_plan, Path(_plan["body"]).read_bytes())))
