"""`python -m bench [--quick | --smoke] [--only SCENARIO,...] [--out FILE]`: start Redis, an API and a
worker, run each scenario (calls, deadlines, fanout, state, load, idle, cluster, client, failover, cost,
instructions, apicpu, schemas, hostile_mcp, doors, hostile_model, schedules, parked, webhooks, tracing) against its
baseline measured in the same run, print one table, save JSON. `--quick` takes fewer samples; `--smoke` runs
each scenario at its smallest size, to see that every one works (CI runs each,
tests/e2e/test_bench_smoke.py): its figures are printed and saved, no target is judged. A scenario that
raises fails the run (exit 1) at every size.
`python -m bench --compare OLD.json NEW.json` puts two saved runs side by side."""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench import (
    api_cpu,
    calls,
    client_path,
    deadlines,
    doors,
    failover,
    fanout,
    hostile_mcp,
    hostile_model,
    instructions,
    load,
    parked,
    redis_cost,
    scale,
    schedules,
    schema_refs,
    state,
    tracing,
    webhooks,
)
from bench.compare import compare
from bench.harness import Figure, Size, cpu_count, default_out, save, table, unjudged

# Each scenario starts the Redis, API and worker it needs (some need several, set up differently).
Scenario = Callable[[Size], list[Figure]]
SCENARIOS: dict[str, Scenario] = {
    "calls": calls.run,
    "deadlines": deadlines.run,
    "fanout": fanout.run,
    "state": state.run,
    "load": load.run,
    "idle": scale.idle,
    "cluster": scale.spread,
    "client": client_path.run,
    "failover": failover.run,
    "cost": redis_cost.run,
    "instructions": instructions.run,
    "apicpu": api_cpu.run,
    "schemas": schema_refs.run,
    "hostile_mcp": hostile_mcp.run,
    "doors": doors.run,
    "hostile_model": hostile_model.run,
    "schedules": schedules.run,
    "parked": parked.run,
    "webhooks": webhooks.run,
    "tracing": tracing.run,
}


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="fewer samples: figures to look at, not to quote")
    sizes.add_argument(
        "--smoke", action="store_true", help="every scenario at its smallest size, to see it work; no target judged"
    )
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma separated: " + ", ".join(SCENARIOS))
    parser.add_argument("--out", type=Path, default=None, help="where the JSON goes (default bench/results/)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"), help="two saved runs side by side")
    args = parser.parse_args()
    if args.compare:
        print(compare(*args.compare))
        return 0
    size = Size.SMOKE if args.smoke else Size.QUICK if args.quick else Size.FULL
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SCENARIOS]
    if unknown:
        parser.error(f"--only: no scenario {', '.join(unknown)}; there are {', '.join(SCENARIOS)}")
    figures: list[Figure] = []
    failed: dict[str, str] = {}
    started = time.monotonic()
    for name in chosen:
        began = time.monotonic()
        try:
            figures += SCENARIOS[name](size)
        except Exception as error:
            failed[name] = f"{type(error).__name__}: {error}"
            traceback.print_exc()
            print(f"{name}: FAILED after {time.monotonic() - began:.0f} s: {failed[name]}", file=sys.stderr, flush=True)
            continue
        print(f"{name}: {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    if not size.judged:
        figures = unjudged(figures)
    print(table(figures, judged=size.judged))
    out = args.out or default_out()
    meta: dict[str, object] = {
        "commit": _commit(),
        "quick": args.quick,
        "size": size.value,
        "judged": size.judged,
        "python": platform.python_version(),
        "cpus": cpu_count(),
        "seconds": round(time.monotonic() - started),
        "failed": failed,
    }
    save(figures, out, meta)
    print(f"\nsaved {out} ({meta['seconds']} s)")
    for name, why in failed.items():
        print(f"scenario {name} failed: {why}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
