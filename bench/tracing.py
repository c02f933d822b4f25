"""Scenario 20: what tracing costs (issue 40's "cheap"). The API's CPU per client call round trip, measured
as scenario 13 measures it (bench/api_cpu.py: the same browser-like client, requests and window), on three
deployments side by side in one run:

- off: no tracing configured, the default (the OpenTelemetry SDK is never imported);
- on: `OTEL_EXPORTER_OTLP_ENDPOINT` naming a local collector (bench/otlp_receiver.py, on 127.0.0.1,
  decoding every export), the SDK's batching at its defaults;
- unreachable: the endpoint a closed port on 127.0.0.1, so every export is refused.

The worker of each traces as its API does. The three take turns, 20 calls at a time (which goes first
turning with each block), so a slow spell of the shared machine falls on all alike; after each block the
bare app of scenario 13 answers the same pairs back to back: the baseline "off" is held against as
scenario 13 holds the API (its target, 2x), so tracing off is seen to cost what the API cost before
tracing (its figure sits with scenario 13's). "On" and "unreachable" are held against "off" (at most 1.2x).

"An unreachable collector never slows a run" is shown by two latencies per deployment, each outside the
CPU windows: the input posted to its `client_tool_dispatched` read (the worker's step, its chat span among
its work), and the ack posted to the call's `tool_result` read; "unreachable" is held against "on" (what
the missing collector adds, at most 1.2x), "on" shown against "off" (what tracing itself adds: the
worker's few Redis round trips a step). Every run must complete; the collector must have received spans.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench.api_cpu import BLOCK, BROWSER, RESULT, bare_api, bare_call, call_paths, cpu_ns, post
from bench.calls import Session, kind, until
from bench.harness import Cluster, Figure, Size, calls_text, cluster, figure, percentile, registered, scripted_agent
from bench.http import RawHttp
from bench.otlp_receiver import Counts, receiving
from bench.sse import RawStream
from broker.transport.embedded import free_port

SCENARIO = "20 tracing"
# Off is the default; the variables are named empty so a tracing setting in the caller's environment
# (the processes inherit it) cannot turn the baseline on.
OFF = {"SWITCHBOARD_TRACING": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ""}
MODES = ("off", "on", "unreachable")


@dataclass
class Samples:
    """One deployment's measurements over a round: API CPU (ns) per call, and the two latencies (ms)."""

    cpu: list[int] = field(default_factory=list)
    dispatch: list[float] = field(default_factory=list)
    round_trip: list[float] = field(default_factory=list)

    @property
    def cpu_us(self) -> float:
        return sum(self.cpu) / len(self.cpu) / 1000


@dataclass
class Round:
    """Each deployment's samples and the bare app's CPU (µs per pair, back to back) over one round."""

    modes: dict[str, Samples]
    bare_us: float


async def _call(pid: int, session: Session, into: Samples) -> None:
    """One run with one client call: its dispatch latency, the API's CPU over the round trip and its
    latency; the run must complete."""
    sent = time.perf_counter()
    await session.send(calls_text(1))
    got = await until(session.events, kind("client_tool_dispatched"))
    into.dispatch.append((time.perf_counter() - sent) * 1000)
    ack, result = call_paths(session, got.event["call_id"])
    before = cpu_ns(pid)
    began = time.perf_counter()
    await post(session.http, ack)
    await post(session.http, result, RESULT)
    await until(session.events, kind("tool_result"))
    into.round_trip.append((time.perf_counter() - began) * 1000)
    into.cpu.append(cpu_ns(pid) - before)
    ended = await until(session.events, lambda r: r.event["type"] in ("run_completed", "run_failed"))
    if ended.event["type"] != "run_completed":
        raise RuntimeError(f"a run failed: {ended.event}")


@dataclass
class Deployment:
    name: str
    running: Cluster
    session: Session | None = None


async def _round(deployments: list[Deployment], bare_pid: int, bare: RawHttp, calls: int) -> Round:
    found = {d.name: Samples() for d in deployments}
    bare_ns = 0
    for block, first in enumerate(range(0, calls, BLOCK)):
        numbers = range(first, min(calls, first + BLOCK))
        # A block of calls on each in turn, as scenario 13 makes them (a server idle for long between
        # calls spends more on each); which one goes first turns with each block.
        turn = block % len(deployments)
        for d in deployments[turn:] + deployments[:turn]:
            assert d.session is not None
            for _ in numbers:
                await _call(d.running.api_pid, d.session, found[d.name])
        session = deployments[0].session
        assert session is not None
        for number in numbers:
            bare_ns += await bare_call(bare_pid, bare, session, number)
    return Round(found, bare_ns / calls / 1000)


async def _measure(
    deployments: list[Deployment], bare: tuple[int, str], rounds: int, calls: int, warm: int
) -> list[Round]:
    async with contextlib.AsyncExitStack() as stack:
        for d in deployments:
            admin = await stack.enter_async_context(d.running.client())
            party = await registered(d.running, admin, await scripted_agent(admin))
            stream = await RawStream.open(d.running.url, party.id, party.token)
            d.session = Session(party.id, party.token, party.client_id, party.http, stream=stream)
            stack.callback(d.session.close)
        bare_pid, bare_url = bare
        session = deployments[0].session
        assert session is not None
        http = RawHttp(bare_url, session.token)
        stack.callback(http.close)
        await _round(deployments, bare_pid, http, warm)
        return [await _round(deployments, bare_pid, http, calls) for _ in range(rounds)]


@contextlib.contextmanager
def _deployments(collector: str) -> Iterator[list[Deployment]]:
    closed = f"http://127.0.0.1:{free_port()}"
    settings = {
        "off": OFF,
        "on": {"OTEL_EXPORTER_OTLP_ENDPOINT": collector},
        "unreachable": {"OTEL_EXPORTER_OTLP_ENDPOINT": closed},
    }
    with contextlib.ExitStack() as stack:
        yield [Deployment(mode, stack.enter_context(cluster(extra={**BROWSER, **settings[mode]}))) for mode in MODES]


def _median(found: list[Round], ratio: str) -> tuple[Round, str]:
    """The round with the median of `ratio` (a mode's CPU to off's, or off's to the bare app's), and the
    spread of that ratio over the rounds."""

    def of(r: Round) -> float:
        off = r.modes["off"].cpu_us
        return off / r.bare_us if ratio == "off" else r.modes[ratio].cpu_us / off

    ordered = sorted(found, key=of)
    return ordered[
        len(ordered) // 2
    ], f"median of {len(found)} rounds, ratio {of(ordered[0]):.2f}x to {of(ordered[-1]):.2f}x"


def _figures(found: list[Round], counts: Counts, calls: int) -> list[Figure]:
    name = "API CPU per client call round trip (ack, result, their frames), 1 at a time"
    off, off_spread = _median(found, "off")
    on, on_spread = _median(found, "on")
    gone, gone_spread = _median(found, "unreachable")
    figures = [
        figure(SCENARIO, f"{name}, tracing off", off.modes["off"].cpu_us, "us", baseline=off.bare_us,
               baseline_name="bare FastAPI on uvicorn, the same two requests, pairs back to back (scenario 13's)",
               target="ratio <= 2", note=f"{off_spread} of {calls} calls; scenario 13's figure, taken in this run"),
        figure(SCENARIO, f"{name}, tracing on, local collector", on.modes["on"].cpu_us, "us",
               baseline=on.modes["off"].cpu_us, baseline_name="tracing off, the same round", target="ratio <= 1.2",
               note=f"{on_spread}; the collector took {counts.spans} spans in {counts.requests} exports"),
        figure(SCENARIO, f"{name}, tracing on, collector unreachable", gone.modes["unreachable"].cpu_us, "us",
               baseline=gone.modes["off"].cpu_us, baseline_name="tracing off, the same round", target="ratio <= 1.2",
               note=f"{gone_spread}; every export refused (a closed port)"),
    ]  # fmt: skip
    for latency, label in (
        ("dispatch", "input posted to its dispatch read"),
        ("round_trip", "ack posted to tool_result read"),
    ):
        every = {mode: [v for r in found for v in getattr(r.modes[mode], latency)] for mode in MODES}
        p50 = {mode: percentile(every[mode], 50) for mode in MODES}
        p99 = {mode: percentile(every[mode], 99) for mode in MODES}
        figures += [
            figure(SCENARIO, f"{label}, p50, tracing off", p50["off"], "ms",
                   note=f"p99 {p99['off']:.3g} ms; {len(every['off'])} runs, every one completed"),
            # What tracing itself adds (the worker's few Redis round trips a step, the spans): no target.
            figure(SCENARIO, f"{label}, p50, tracing on", p50["on"], "ms", baseline=p50["off"],
                   baseline_name="tracing off", note=f"p99 {p99['on']:.3g} ms; every run completed"),
            # What a collector that is not there adds to that: nothing, is the claim.
            figure(SCENARIO, f"{label}, p50, tracing on, collector unreachable", p50["unreachable"], "ms",
                   baseline=p50["on"], baseline_name="tracing on, local collector", target="ratio <= 1.2",
                   note=f"p99 {p99['unreachable']:.3g} ms ({p99['unreachable'] / p99['on']:.2f}x on's); "
                   "every run completed"),
        ]  # fmt: skip
    return figures


def run(size: Size) -> list[Figure]:
    rounds, calls, warm = size.pick(smoke=(1, 20, 5), quick=(3, 200, 20), full=(7, 500, 50))
    with receiving() as (collector, counts):
        with _deployments(collector) as deployments, bare_api() as bare:
            found = asyncio.run(_measure(deployments, bare, rounds, calls, warm))
        # The deployments are stopped: each API and worker exported what it still held as it shut down.
        if counts.spans == 0 or counts.bad:
            raise RuntimeError(f"the collector took {counts.spans} spans ({counts.bad} exports it could not read)")
    return _figures(found, counts, calls)
