"""examples/mcp_client.py against API and worker processes: the session's tools listed and called over
MCP, the call answered by the registration the script made, and that registration left."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from tests.e2e.served import Served, scripted_session
from tests.examples.support import EXAMPLES, of_type, session_log, text_of

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

SCRIPT = EXAMPLES / "mcp_client.py"


def run_example(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    return subprocess.run(
        [sys.executable, str(SCRIPT)], env={**base, **env}, capture_output=True, text=True, timeout=60
    )


def test_an_mcp_client_lists_and_calls_the_sessions_tools(served: Served) -> None:
    sid, token = asyncio.run(scripted_session(served.url, served.key, "mcp-example"))
    run = run_example(SWITCHBOARD_URL=served.url, SWITCHBOARD_SESSION_ID=sid, SWITCHBOARD_SESSION_TOKEN=token)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tool: client__glossary__define: What a word means in this app" in run.stdout
    assert "answer: routes an agent's tool calls to the apps that serve them" in run.stdout
    events = session_log(served, sid)
    (dispatched,) = of_type(events, "client_tool_dispatched")
    assert (dispatched["from"], dispatched["tool"]) == ("mcp", "define")
    (result,) = of_type(events, "tool_result")
    assert text_of(result) == "routes an agent's tool calls to the apps that serve them"
    assert of_type(events, "client_left")
    assert not of_type(events, "run_queued")


def test_a_token_of_no_session_fails_saying_so(served: Served) -> None:
    run = run_example(
        SWITCHBOARD_URL=served.url, SWITCHBOARD_SESSION_ID="0" * 8, SWITCHBOARD_SESSION_TOKEN="swb_st_nothing"
    )
    assert run.returncode == 1
    assert "registration refused: 401" in run.stderr
