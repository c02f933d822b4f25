"""What the API and the worker keep per parked run: `python -m bench.parked_memory N [--trace FRAMES]`.

A diagnostic beside scenario 18 (bench/parked.py), not a scenario: one API and one worker on one Redis,
4 runs parked to warm them, then N more (half on an approval, half on an acked call, as the scenario
makes them). Prints each process's RSS before, after, after a full garbage collection and after glibc's
malloc_trim(0), pymalloc's arena counts (sys._debugmallocstats), and with --trace the Python heap's growth
per parked session by where it was allocated (tracemalloc, started after the warm-up, with FRAMES frames:
tracing makes the processes several times slower, so calls are given an hour before their ack deadline).

The processes are reached through a sitecustomize module put on their PYTHONPATH: SIGUSR1 collects
garbage, writes the allocator's statistics and (tracing) a snapshot; SIGUSR2 runs malloc_trim.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import tempfile
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

from bench.harness import Cluster, cluster, rss_kb
from bench.http import RawHttp
from bench.parked import _agents, _worker_pid, park

HOOK = """
import ctypes, gc, os, signal, sys, tracemalloc
_out, _frames, _n = os.environ["PARKED_MEMORY_DIR"], int(os.environ.get("PARKED_MEMORY_TRACE", "0")), [0]
def _dump(*_):
    gc.collect()
    _n[0] += 1
    if _n[0] == 1 and _frames:
        tracemalloc.start(_frames)
    if tracemalloc.is_tracing():
        tracemalloc.take_snapshot().dump(f"{_out}/{os.getpid()}-{_n[0]}.snap")
    saved = os.dup(2)
    with open(f"{_out}/{os.getpid()}-{_n[0]}.stats", "w") as out:
        sys.stderr.flush(); os.dup2(out.fileno(), 2); sys._debugmallocstats(); os.dup2(saved, 2)
    os.close(saved)
    open(f"{_out}/{os.getpid()}-{_n[0]}.done", "w").close()
def _trim(*_):
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    open(f"{_out}/{os.getpid()}-trim.done", "w").close()
signal.signal(signal.SIGUSR1, _dump)
signal.signal(signal.SIGUSR2, _trim)
"""
# Each process's settle before a reading: the worker's folded conversations leave after this idle time.
IDLE_S = 10.0
ROOT = str(Path(__file__).resolve().parent.parent)


def _signal(pid: int, sig: int, marker: Path) -> None:
    os.kill(pid, sig)
    deadline = time.monotonic() + 300
    while not marker.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} did not answer {sig}")
        time.sleep(0.1)


def _arenas(path: Path) -> str:
    text = path.read_text()
    arenas = re.search(r"# arenas allocated current\s*=\s*([\d,]+)", text)
    used = re.search(r"# bytes in allocated blocks\s*=\s*([\d,]+)", text)
    free = re.search(r"# bytes in available blocks\s*=\s*([\d,]+)", text)
    if not (arenas and used and free):
        return "pymalloc statistics not found"
    mib = [int(m.group(1).replace(",", "")) / 2**20 for m in (used, free)]
    return f"{arenas.group(1)} arenas, {mib[0]:.1f} MiB in blocks, {mib[1]:.1f} MiB free in their pools"


def _growth(before: Path, after: Path, count: int, top: int = 15) -> None:
    """The heap's growth by the innermost frame of this repository's code that allocated it."""
    grown: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    old, new = tracemalloc.Snapshot.load(str(before)), tracemalloc.Snapshot.load(str(after))
    for stat in new.compare_to(old, "traceback"):
        own = [frame for frame in stat.traceback if frame.filename.startswith(ROOT)] or list(stat.traceback)
        frame = own[-1]
        counts = grown[f"{frame.filename.removeprefix(ROOT + '/')}:{frame.lineno}"]
        counts[0] += stat.size_diff
        counts[1] += stat.count_diff
    total = sum(size for size, _ in grown.values())
    print(f"  Python heap grew {total / 1024:.0f} KiB, {total / count:.0f} B a parked session; largest:")
    for where, (size, blocks) in sorted(grown.items(), key=lambda item: -item[1][0])[:top]:
        print(f"    {size / count:+6.0f} B/session {size / 1024:+8.0f} KiB {blocks:+7d} blocks  {where}")


async def _measure(running: Cluster, count: int, out: Path) -> None:
    http = RawHttp(running.url, running.key)
    pids = {"api": running.api_pid, "worker": _worker_pid(running)}
    try:
        agents = await _agents(running)
        await park(http, agents, 4)
        await asyncio.sleep(IDLE_S * 1.5)
        rss = {name: [rss_kb(pid)] for name, pid in pids.items()}
        for pid in pids.values():
            _signal(pid, signal.SIGUSR1, out / f"{pid}-1.done")
        started = time.monotonic()
        await park(http, agents, count)
        took = time.monotonic() - started
        await asyncio.sleep(IDLE_S * 1.5)
    finally:
        http.close()
    for name, pid in pids.items():
        rss[name].append(rss_kb(pid))
        _signal(pid, signal.SIGUSR1, out / f"{pid}-2.done")
        rss[name].append(rss_kb(pid))
        _signal(pid, signal.SIGUSR2, out / f"{pid}-trim.done")
        rss[name].append(rss_kb(pid))
    print(f"{count:,} parked in {took:.0f} s ({count / took:.0f}/s)")
    for name, pid in pids.items():
        before, after, collected, trimmed = (kb / 1024 for kb in rss[name])
        print(f"{name}: RSS {before:.1f} MiB before, {after:.1f} MiB parked ({after / before:.2f}x), "
              f"{collected:.1f} collected, {trimmed:.1f} after malloc_trim ({trimmed / before:.2f}x)")  # fmt: skip
        print(f"  before: {_arenas(out / f'{pid}-1.stats')}\n  parked: {_arenas(out / f'{pid}-2.stats')}")
        if (out / f"{pid}-2.snap").exists():
            _growth(out / f"{pid}-1.snap", out / f"{pid}-2.snap", count)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.parked_memory", description=__doc__.split("\n")[0])
    parser.add_argument("sessions", type=int)
    parser.add_argument("--trace", type=int, default=0, metavar="FRAMES", help="tracemalloc's frames (0: off)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="parked-memory-") as scratch:
        out = Path(scratch)
        (out / "sitecustomize.py").write_text(HOOK)
        path = os.pathsep.join(p for p in (scratch, ROOT, os.environ.get("PYTHONPATH", "")) if p)
        extra = {
            "PYTHONPATH": path,
            "PARKED_MEMORY_DIR": scratch,
            "PARKED_MEMORY_TRACE": str(args.trace),
            "SWITCHBOARD_WORKER_TRANSCRIPT_IDLE_S": str(IDLE_S),
            "SWITCHBOARD_ACK_TIMEOUT_S": "3600",
        }
        with cluster(extra=extra) as running:
            time.sleep(1)
            asyncio.run(_measure(running, args.sessions, out))


if __name__ == "__main__":
    main()
