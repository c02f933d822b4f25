"""`python -m bench` hands each scenario the size asked for (`--smoke`, `--quick`, or the full run by default),
and a smoke run judges no target but still fails when a scenario raises."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import __main__ as runner
from bench.harness import Figure, Size, figure


def _run(monkeypatch: pytest.MonkeyPatch, out: Path, *flags: str) -> tuple[int, list[Size]]:
    seen: list[Size] = []

    def scenario(size: Size) -> list[Figure]:
        seen.append(size)
        # A figure that misses its target: 5 ms against `value < 1`.
        return [figure("1 sized", "a figure", 5.0, "ms", target="value < 1")]

    monkeypatch.setattr(runner, "SCENARIOS", {"sized": scenario})
    monkeypatch.setattr(sys, "argv", ["bench", *flags, "--out", str(out)])
    return runner.main(), seen


@pytest.mark.parametrize(("flags", "size"), [((), Size.FULL), (("--quick",), Size.QUICK), (("--smoke",), Size.SMOKE)])
def test_each_scenario_gets_the_size_asked_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: tuple[str, ...], size: Size
) -> None:
    _, seen = _run(monkeypatch, tmp_path / "run.json", *flags)
    assert seen == [size]
    meta = json.loads((tmp_path / "run.json").read_text())["meta"]
    assert meta["size"] == size.value
    assert meta["quick"] is (size is Size.QUICK)


def test_a_full_run_judges_its_targets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, _ = _run(monkeypatch, tmp_path / "run.json")
    saved = json.loads((tmp_path / "run.json").read_text())
    assert code == 0
    assert saved["meta"]["judged"] is True
    assert saved["figures"][0]["met"] is False


def test_a_smoke_run_judges_no_target_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _run(monkeypatch, tmp_path / "run.json", "--smoke")
    saved = json.loads((tmp_path / "run.json").read_text())
    assert code == 0
    assert saved["meta"]["judged"] is False
    assert saved["figures"][0]["met"] is None
    printed = capsys.readouterr().out
    assert printed.startswith("smoke run:")
    assert "not judged" in printed
    assert " NO " not in printed


def test_a_scenario_that_raises_fails_a_smoke_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(_: Size) -> list[Figure]:
        raise RuntimeError("no event on the stream for 60 s")

    monkeypatch.setattr(runner, "SCENARIOS", {"broken": broken})
    monkeypatch.setattr(sys, "argv", ["bench", "--smoke", "--out", str(tmp_path / "run.json")])
    assert runner.main() == 1
    assert json.loads((tmp_path / "run.json").read_text())["meta"]["failed"] == {
        "broken": "RuntimeError: no event on the stream for 60 s"
    }


def test_smoke_and_quick_together_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["bench", "--smoke", "--quick"])
    with pytest.raises(SystemExit) as exited:
        runner.main()
    assert exited.value.code == 2


def test_size_picks_its_own_value() -> None:
    assert [size.pick(smoke=1, quick=2, full=3) for size in Size] == [1, 2, 3]
    assert [size.judged for size in Size] == [False, True, True]
