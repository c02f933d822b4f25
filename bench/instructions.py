"""Scenario 12: the instructions Redis runs per operation, counted by valgrind's callgrind, next to the
same raw baselines as scenario 11 counted the same way.

Redis CPU per call (scenario 11) is the figure that matters, but on a shared virtual machine it moves by
a fifth between runs, more than most changes to a script. Instructions do not: the same work counts the
same within a few percent, so a change to the Lua shows here first. They leave out what the kernel does
for Redis (reads, writes, epoll), which is most of a raw `SET`'s cost and little of a script's, so these
ratios are much larger than scenario 11's and are compared with each other, not with its targets.

Redis runs under callgrind (tens of times slower) with the API and a worker as in every scenario; the
counts around each measurement have the idle background (measured just before) taken out. Needs
`valgrind` on PATH; without it the scenario reports nothing and says why.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench import baselines
from bench.calls import Session, many_in_flight, open_session
from bench.harness import Cluster, Figure, Size, cluster, figure, scripted_agent
from bench.redis_cost import pings, raw_set_px, registrations

IDLE_WINDOW_S = 3.0
SCENARIO = "12 Redis instructions"


class Counter:
    """Reads callgrind's count of the Redis process: zeroed, then dumped, around each measurement."""

    def __init__(self, pid: int, out_dir: Path) -> None:
        self._pid = str(pid)
        self._out_dir = out_dir
        self._dumps = 0

    def _control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, self._pid], check=True, capture_output=True, timeout=120)

    def zero(self) -> None:
        self._control("--zero")

    def dump(self) -> int:
        """Instructions since the last zero or dump."""
        self._control("--dump")
        self._dumps += 1
        total = 0
        for line in (self._out_dir / f"callgrind.out.{self._pid}.{self._dumps}").read_text().splitlines():
            if line.startswith("totals:"):
                total = int(line.split()[1])
        return total


async def _per_op(counter: Counter, idle: float, count: int, work: Callable[[], Awaitable[object]]) -> float:
    counter.zero()
    started = time.monotonic()
    await work()
    return (counter.dump() - idle * (time.monotonic() - started)) / count


async def _measure(running: Cluster, counter: Counter, size: Size) -> list[Figure]:
    url = running.redis.url
    # A smoke run's counts still dwarf the idle background taken out of them (about 1.5 M instructions a
    # second against some 12 k a SET): fewer, and the baselines come out negative.
    batches, ping_count, raw = size.pick(smoke=(1, 100, 500), quick=(2, 200, 1000), full=(5, 500, 3000))
    idle_s = size.pick(smoke=2.0, quick=IDLE_WINDOW_S, full=IDLE_WINDOW_S)
    async with running.client() as admin:
        agent_id = await scripted_agent(admin)
        session = await open_session(running, admin, agent_id)
        # Registrations go to sessions of their own: a session holds at most 32 active clients.
        others: list[Session] = [await open_session(running, admin, agent_id) for _ in range(ping_count // 20)]
        try:
            await many_in_flight(session, 1, 100)
            await pings(session, 20)
            counter.zero()
            await asyncio.sleep(idle_s)
            idle = counter.dump() / idle_s
            wide = await _per_op(counter, idle, batches * 100, lambda: many_in_flight(session, batches, 100))
            raw_wide = await _per_op(counter, idle, raw, lambda: baselines.redis_round_trip(url, raw, 100))
            ping = await _per_op(counter, idle, ping_count, lambda: pings(session, ping_count))
            raw_set = await _per_op(counter, idle, ping_count, lambda: raw_set_px(url, ping_count))
            register = await _per_op(counter, idle, len(others) * 20, lambda: registrations(others, 20))
        finally:
            session.close()
            for other in others:
                other.close()
    return [
        figure(SCENARIO, "round trip, 100 in flight, per call", wide / 1000, "k instr", baseline=raw_wide / 1000,
               baseline_name="raw stream round trip, 100 in flight"),
        figure(SCENARIO, "ping", ping / 1000, "k instr", baseline=raw_set / 1000, baseline_name="raw SET PX"),
        figure(SCENARIO, "registration", register / 1000, "k instr", baseline=raw_set / 1000,
               baseline_name="raw SET PX"),
        figure(SCENARIO, "idle background", idle / 1000, "k instr/s"),
    ]  # fmt: skip


def run(size: Size) -> list[Figure]:
    valgrind = shutil.which("valgrind")
    if valgrind is None or shutil.which("callgrind_control") is None:
        print("instructions: skipped, valgrind (with callgrind_control) is not on PATH", file=sys.stderr)
        return []
    out_dir = Path(tempfile.mkdtemp(prefix="switchboard-callgrind-"))
    wrapper = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out_dir}/callgrind.out.%p"]
    with cluster(redis_wrapper=wrapper) as running:
        time.sleep(size.pick(smoke=1, quick=3, full=3))  # the worker's first reads of its partitions
        pid = running.redis.pid
        assert pid is not None
        return asyncio.run(_measure(running, Counter(pid, out_dir), size))
