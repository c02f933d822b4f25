"""`python -m bench` keeps what finished when a scenario fails, says which failed, and exits non-zero."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import __main__ as runner
from bench.harness import Figure, figure


def finished(_: bool) -> list[Figure]:
    return [figure("1 fine", "a figure", 1.5, "ms")]


def broken(_: bool) -> list[Figure]:
    raise RuntimeError("2,843 registrations lapsed")


def test_a_failed_scenario_loses_no_other_figure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(runner, "SCENARIOS", {"first": finished, "second": broken, "third": finished})
    out = tmp_path / "run.json"
    monkeypatch.setattr(sys, "argv", ["bench", "--only", "first,second,third", "--out", str(out)])
    assert runner.main() == 1
    saved = json.loads(out.read_text())
    assert [f["name"] for f in saved["figures"]] == ["a figure", "a figure"]
    assert saved["meta"]["failed"] == {"second": "RuntimeError: 2,843 registrations lapsed"}
    assert "scenario second failed: RuntimeError: 2,843 registrations lapsed" in capsys.readouterr().err


def test_an_unknown_scenario_is_refused_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "SCENARIOS", {"first": broken})
    monkeypatch.setattr(sys, "argv", ["bench", "--only", "frist"])
    with pytest.raises(SystemExit) as exited:
        runner.main()
    assert exited.value.code == 2
