"""Scenarios 1 to 3: dispatch latency, the full round trip (1 and 100 in flight), continuation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx

from bench import arq_venv, baselines
from bench.harness import (
    Cluster,
    Figure,
    Registered,
    Size,
    calls_text,
    cluster,
    created_at_s,
    figure,
    registered,
    scripted_agent,
    summary,
)
from bench.sse import RawStream, Received

ARQ_TUNED_POLL_S = 0.01
ARQ_DEFAULT_POLL_S = 0.5
# The longest a session's reader waits for its next event: a step that never comes (a worker whose every
# step fails, say) fails the scenario rather than hanging the run.
EVENT_WAIT_S = 60.0


async def until(events: AsyncIterator[Received], done: Callable[[Received], bool]) -> Received:
    while True:
        received = await anext(events)
        if done(received):
            return received


def kind(name: str) -> Callable[[Received], bool]:
    return lambda r: r.event["type"] == name


@dataclass
class Session(Registered):
    """A registered session and its event stream (with timing events)."""

    stream: RawStream = field(kw_only=True)
    events: AsyncIterator[Received] = field(init=False)

    def __post_init__(self) -> None:
        self.events = self.stream.events(EVENT_WAIT_S)

    def close(self) -> None:
        self.stream.close()
        super().close()


async def open_session(cluster: Cluster, admin: httpx.AsyncClient, agent_id: str) -> Session:
    party = await registered(cluster, admin, agent_id)
    stream = await RawStream.open(cluster.url, party.id, party.token, "?include=timing")
    return Session(party.id, party.token, party.client_id, party.http, stream=stream)


async def one_in_flight(session: Session, runs: int) -> tuple[list[float], list[float], list[float]]:
    """Per run: dispatch latency (commit to the client reading it), round trip (the client reading the
    dispatch to reading its tool_result, ack and result between), and continuation (the result posted to
    the next model step starting). All in ms."""
    dispatch, round_trip, continuation = [], [], []
    for _ in range(runs):
        await session.send(calls_text(1))
        got = await until(session.events, kind("client_tool_dispatched"))
        dispatch.append((got.at - created_at_s(got.event)) * 1000)
        posted = await session.answer(got.event["call_id"])
        result = await until(session.events, kind("tool_result"))
        round_trip.append((result.at - got.at) * 1000)
        step = await until(
            session.events, lambda r: r.event["type"] == "custom" and r.event["payload"].get("step") == 1
        )
        continuation.append((step.event["payload"]["started_at_us"] / 1e6 - posted) * 1000)
        await until(session.events, kind("run_completed"))
    return dispatch, round_trip, continuation


async def many_in_flight(session: Session, batches: int, width: int) -> tuple[list[float], float]:
    """Batches of `width` parallel calls, each answered as soon as it is seen: per-call round trips (ms)
    and calls per second over all batches (each batch timed from its first dispatch seen to its last
    tool_result seen; the model step between batches is not a round trip and is left out)."""
    latencies: list[float] = []
    busy = 0.0
    text = calls_text(width)
    for _ in range(batches):
        await session.send(text)
        seen: dict[str, float] = {}
        answering: list[asyncio.Task[float]] = []
        first = last = 0.0
        settled = 0
        while settled < width:
            got = await anext(session.events)
            event = got.event
            if event["type"] == "client_tool_dispatched":
                first = first or got.at
                seen[event["call_id"]] = got.at
                answering.append(asyncio.create_task(session.answer(event["call_id"])))
            elif event["type"] == "tool_result":
                latencies.append((got.at - seen[event["call_id"]]) * 1000)
                last = got.at
                settled += 1
        busy += last - first
        await asyncio.gather(*answering)
        await until(session.events, kind("run_completed"))
    return latencies, batches * width / busy


def run(size: Size) -> list[Figure]:
    with cluster() as running:
        return asyncio.run(_run(running, size))


async def _run(cluster: Cluster, size: Size) -> list[Figure]:
    runs, batches = size.pick(smoke=(5, 1), quick=(40, 3), full=(200, 10))
    warm = size.pick(smoke=1, quick=5, full=5)
    # The baselines' counts: raw dispatch, raw round trips at 1 and 100 in flight, arq's round trips at 1
    # and 100 in flight, arq's enqueue-to-start at the tuned and the default poll.
    raw, raw_wide = size.pick(smoke=(100, 500), quick=(1000, 5000), full=(1000, 5000))
    arq_one_n, arq_wide_n = size.pick(smoke=(10, 200), quick=(100, 1000), full=(300, 3000))
    arq_tuned_n, arq_default_n = size.pick(smoke=(5, 2), quick=(50, 10), full=(50, 20))
    async with cluster.client() as admin:
        agent_id = await scripted_agent(admin)
        session = await open_session(cluster, admin, agent_id)
        try:
            for _ in range(warm):  # warm the processes up
                await one_in_flight(session, 1)
            dispatch, round_trip, continuation = await one_in_flight(session, runs)
            await many_in_flight(session, 1, 100)  # opens the connections the batches reuse
            wide, rate = await many_in_flight(session, batches, 100)
        finally:
            session.close()
    url = cluster.redis.url
    raw_dispatch = await baselines.xadd_xreadgroup(url, raw)
    raw_one, _ = await baselines.redis_round_trip(url, raw, 1)
    _, raw_rate = await baselines.redis_round_trip(url, raw_wide, 100)
    arq_one, _ = await arq_venv.arq_round_trip(url, arq_one_n, 1, ARQ_TUNED_POLL_S)
    _, arq_rate = await arq_venv.arq_round_trip(url, arq_wide_n, 100, ARQ_TUNED_POLL_S)
    arq_start_tuned = await arq_venv.arq_enqueue_to_start(url, arq_tuned_n, ARQ_TUNED_POLL_S)
    arq_start_default = await arq_venv.arq_enqueue_to_start(url, arq_default_n, ARQ_DEFAULT_POLL_S)

    d, rt, cont, w = summary(dispatch), summary(round_trip), summary(continuation), summary(wide)
    return [
        figure("1 dispatch", "commit to client, p50", d["p50"], "ms", baseline=summary(raw_dispatch)["p50"],
               baseline_name="XADD to XREADGROUP p50", target="ratio <= 3"),
        figure("1 dispatch", "commit to client, p99", d["p99"], "ms", baseline=summary(raw_dispatch)["p99"],
               baseline_name="XADD to XREADGROUP p99"),
        figure("2 round trip", "1 in flight, p50", rt["p50"], "ms", baseline=summary(arq_one)["p50"],
               baseline_name=f"arq, poll {ARQ_TUNED_POLL_S:g} s, p50", target="ratio <= 0.2"),
        figure("2 round trip", "1 in flight, p99", rt["p99"], "ms", baseline=summary(raw_one)["p99"],
               baseline_name="raw Redis p99"),
        figure("2 round trip", "1 in flight vs raw Redis, p50", rt["p50"], "ms", baseline=summary(raw_one)["p50"],
               baseline_name="raw Redis p50"),
        figure("2 round trip", "100 in flight, calls/s", rate, "/s", baseline=arq_rate,
               baseline_name=f"arq, poll {ARQ_TUNED_POLL_S:g} s", target="ratio >= 2"),
        figure("2 round trip", "100 in flight, calls/s (absolute)", rate, "/s", baseline=raw_rate,
               baseline_name="raw Redis, 1 consumer", target="value >= 2000"),
        figure("2 round trip", "100 in flight, p50 / p99", w["p50"], "ms", note=f"p99 {w['p99']:.1f} ms"),
        figure("3 continuation", "result to next step, p50", cont["p50"], "ms",
               baseline=summary(arq_start_tuned)["p50"], baseline_name=f"arq start, poll {ARQ_TUNED_POLL_S:g} s, p50",
               target="value < 10"),
        figure("3 continuation", "result to next step, p99", cont["p99"], "ms",
               baseline=summary(arq_start_default)["p50"],
               baseline_name=f"arq start, default poll {ARQ_DEFAULT_POLL_S:g} s, p50"),
    ]  # fmt: skip
