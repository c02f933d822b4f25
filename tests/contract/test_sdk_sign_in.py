"""The real `subako` SDK (0.1.1, Python 3.12+), unchanged, following a session in which a person signs in to
an agent's OAuth grant (tests/contract/sign_in_scenario.py), against real API and worker processes and the
`mcp` package's own authorization server (tests/oauth_server.py, served by this test's loop): the SDK's
default view holds no sign-in event and takes the session whole; `?include=extensions` shows them."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from pathlib import Path

import pytest

from broker.transport.embedded import free_port
from switchboard.processes import Processes, server_env
from tests.contract.test_sdk import sdk_venv_python
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET, authorization_server

pytestmark = [pytest.mark.contract, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


async def test_the_sdk_follows_a_session_that_signs_in(redis_url: str, tmp_path: Path) -> None:
    python = sdk_venv_python()
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    scopes = ["notes:read", "notes:write"]
    async with authorization_server(
        public + "/v1/mcp/oauth/callback", scopes=scopes, method="client_secret_basic"
    ) as server:
        # The grant's server listens on 127.0.0.1: reachable only with private addresses allowed.
        env, key = server_env(
            redis_url,
            secret_key=secrets.token_urlsafe(32),
            public_url=public,
            provider_allow_private="true",
            ack_timeout_s="10",
            result_timeout_s="30",
        )
        (tmp_path / "logs").mkdir()
        processes = Processes(env, tmp_path / "logs")
        try:
            processes.worker()
            processes.api(port)
            more = {
                "SWITCHBOARD_URL": public,
                "SWITCHBOARD_API_KEY": key,
                "SWITCHBOARD_OAUTH_MCP_URL": server.issuer + "/mcp",
                "SWITCHBOARD_OAUTH_CLIENT_ID": CLIENT_ID,
                "SWITCHBOARD_OAUTH_CLIENT_SECRET": CLIENT_SECRET,
            }
            # Run from this loop, which serves the authorization server the scenario's browser visits.
            driver = await asyncio.create_subprocess_exec(
                python,
                "-m",
                "tests.contract.sign_in_scenario",
                cwd=ROOT,
                env={**os.environ, **more},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(driver.communicate(), 150)
            logs = f"{err.decode(errors='replace')}\n{processes.tail()}"
        finally:
            processes.stop_all()
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    assert lines, f"the scenario did not report:\n{logs}"
    (result,) = lines
    assert result["ok"], f"{result['detail']}\n{logs}"
    assert [client.client_id for client in server.exchanged] == [CLIENT_ID]
