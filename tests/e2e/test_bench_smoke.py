"""Every benchmark scenario at its smallest size (`python -m bench --smoke --only NAME`), one test each, so
one that breaks is seen when it breaks and the scenarios share the suite's cores with the other tests
rather than running one after another at its end. No target is judged at this size
(docs/performance.md); the run must only finish, with every figure it reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_scenario_runs_at_its_smallest_size(scenario: str, tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--only", scenario, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    saved = json.loads(out.read_text())
    assert saved["meta"]["size"] == "smoke"
    assert saved["meta"]["failed"] == {}
    assert saved["figures"], done.stdout[-3000:]
