"""Scenario 14: what a tool schema's references cost on an event loop, against a schema of the same size
whose references are the short JSON Pointers people write (`#/$defs/Name`), measured in the same run.

Nothing here needs Redis or a server: registration's acceptance (`check_json_schema`, as the API runs it
on its loop for every tool of a registration) and the worker's first look at a call's arguments (the 200
steps it may spend on its loop before a check goes to a child) are timed in this process.

- Anchors: N references to N `$anchor`s. A resolver that finds an anchor by itself crawls the whole
  schema again for each lookup, so this grew with the square of N (30 s at 2,000 before the index).
- Long pointers: N / 2 references whose JSON Pointer has 16 segments (the most accepted), each walked
  per lookup (and costing up to their square when every segment is a keyword, as here).
- The inline check: 18 arguments, each applying a reference to an anchor in a schema of 6,000 anchors,
  against the same with pointers.

Each figure is the median of its samples; the targets hold the costly shape to a few times the plain one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from api.schemas.json_schema import check_json_schema
from bench.harness import Figure, Size, figure
from common.schema.budget import Budgeted
from common.schema.checks import INLINE_STEPS

SCENARIO = "14 schema references"
SEGMENTS = 16


def _anchors(count: int, by_anchor: bool) -> dict[str, Any]:
    targets = {f"p{i}": {"$anchor": f"a{i}", "type": "string"} for i in range(count)}
    refs = {f"r{i}": {"$ref": f"#a{i}" if by_anchor else f"#/properties/p{i}"} for i in range(count)}
    return {"type": "object", "properties": {**targets, **refs}}


def _pointers(count: int, segments: int) -> dict[str, Any]:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(segments - 2):
        deep = {"not": deep}
    pointer = "#/$defs/d" + "/not" * (segments - 2)
    return {"type": "object", "$defs": {"d": deep}, "properties": {f"r{i}": {"$ref": pointer} for i in range(count)}}


def _median_s(samples: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _inline_check_s(samples: int, by_anchor: bool) -> float:
    budgeted = Budgeted()
    defs = {f"p{i}": {"$anchor": f"a{i}"} for i in range(6_000)}
    target = "#a0" if by_anchor else "#/$defs/p0"
    validator = budgeted.compile({"type": "object", "$defs": defs, "additionalProperties": {"$ref": target}})
    arguments = {f"x{i}": "s" for i in range(18)}
    return _median_s(samples, lambda: budgeted.problem(validator, arguments, INLINE_STEPS))


def run(size: Size) -> list[Figure]:
    count = size.pick(smoke=200, quick=2_000, full=2_000)
    samples = size.pick(smoke=1, quick=5, full=15)
    plain = _median_s(samples, lambda: check_json_schema(_anchors(count, by_anchor=False)))
    anchored = _median_s(samples, lambda: check_json_schema(_anchors(count, by_anchor=True)))
    # A schema's references hold at most 20,000 segments: 1,000 of 16 fit.
    pointers = count // 2
    short = _median_s(samples, lambda: check_json_schema(_pointers(pointers, 2)))
    long = _median_s(samples, lambda: check_json_schema(_pointers(pointers, SEGMENTS)))
    inline_pointer = _inline_check_s(samples, by_anchor=False)
    inline_anchor = _inline_check_s(samples, by_anchor=True)
    return [
        figure(SCENARIO, f"accept {count:,} anchor references", anchored * 1000, "ms", baseline=plain * 1000,
               baseline_name=f"{count:,} pointer references", target="ratio <= 3"),
        figure(SCENARIO, f"accept {pointers:,} pointers of {SEGMENTS} segments", long * 1000, "ms",
               baseline=short * 1000, baseline_name="pointers of 2 segments", target="ratio <= 4"),
        figure(SCENARIO, "inline check, 18 anchor references in 6,000 anchors", inline_anchor * 1e6, "us",
               baseline=inline_pointer * 1e6, baseline_name="the same by pointer", target="ratio <= 3"),
    ]  # fmt: skip
