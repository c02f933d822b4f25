"""examples/curl.sh, run with bash against API and worker processes: the whole session, and its exit
status when a step fails."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess

import pytest

from broker.transport.embedded import free_port
from tests.e2e.served import Served, scripted_session
from tests.examples.support import EXAMPLES, admin, listed, of_type, session_log, text_of

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

SCRIPT = EXAMPLES / "curl.sh"


@pytest.fixture(autouse=True)
def _tools() -> None:
    missing = [tool for tool in ("bash", "curl", "python3") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"examples/curl.sh needs {', '.join(missing)} on PATH")


def curl_sh(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    return subprocess.run(["bash", str(SCRIPT)], env={**base, **env}, capture_output=True, text=True, timeout=60)


def printed(run: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """The script's `name: value` lines."""
    return dict(line.split(": ", 1) for line in run.stdout.splitlines())


def test_the_curl_session_answers_its_call_and_prints_the_runs_final_message(served: Served) -> None:
    env = {"SWITCHBOARD_URL": served.url, "SWITCHBOARD_API_KEY": served.key}
    before = [a for a in listed(served, "/v1/agents") if a["name"] == "scripted"]
    runs = [curl_sh(**env), curl_sh(**env)]
    for run in runs:
        assert run.returncode == 0, run.stdout + run.stderr
    # The newest agent of that name, found by both runs (made by the first if there was none).
    agents = [a for a in listed(served, "/v1/agents") if a["name"] == "scripted"]
    assert len(agents) == max(len(before), 1)
    for run in runs:
        lines = printed(run)
        assert lines["agent"].split()[0] == agents[0]["id"]
        events = session_log(served, lines["session"])
        [registered] = of_type(events, "client_registered")
        assert lines["client"] == f"{registered['name']} ({registered['client_id']})"
        [dispatched] = of_type(events, "client_tool_dispatched")
        assert lines["call"].startswith(dispatched["call_id"])
        assert of_type(events, "client_tool_acked")[0]["call_id"] == dispatched["call_id"]
        [result] = of_type(events, "tool_result")
        assert not result["is_error"]
        assert dispatched["arguments"]["order_id"] in text_of(result)
        [completed] = of_type(events, "run_completed")
        assert completed["run_id"] == lines["run"]
        assert lines["answer"] == text_of(of_type(events, "message_assistant")[-1])
        assert lines["answer"].endswith(text_of(result))
        assert [e["reason"] for e in of_type(events, "client_left")] == ["departed"]


def test_a_wrong_key_stops_the_script_at_its_first_step_with_the_answer(served: Served) -> None:
    before = listed(served, "/v1/sessions")
    run = curl_sh(SWITCHBOARD_URL=served.url, SWITCHBOARD_API_KEY="swb_ak_" + "x" * 40)
    assert run.returncode != 0
    assert "401" in run.stderr
    assert "unauthorized" in run.stderr
    assert run.stdout == ""
    # Its own line alone: the server's answer, not curl's `curl: (22) ...` before it.
    assert run.stderr.startswith("curl.sh: GET /v1/agents"), run.stderr
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert listed(served, "/v1/sessions") == before


def test_no_key_and_no_server_each_stop_the_script() -> None:
    run = curl_sh(SWITCHBOARD_URL="http://127.0.0.1:9")
    assert run.returncode != 0
    assert "SWITCHBOARD_API_KEY" in run.stderr
    url = f"http://127.0.0.1:{free_port()}"
    run = curl_sh(SWITCHBOARD_URL=url, SWITCHBOARD_API_KEY="swb_ak_" + "x" * 40)
    assert run.returncode != 0
    assert "failed" in run.stderr
    assert run.stdout == ""
    # One line, with curl's reason in it since no server answered.
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert run.stderr.startswith("curl.sh: GET /v1/agents"), run.stderr
    assert "Failed to connect" in run.stderr or "Couldn't connect" in run.stderr, run.stderr


def test_a_step_that_fails_midway_stops_the_script_there(served: Served) -> None:
    # The agent is there to be found; a key that may read agents but not create sessions fails at step 2.
    asyncio.run(scripted_session(served.url, served.key, "scripted"))
    with admin(served) as http:
        minted = http.post("/v1/api-keys", json={"label": "agents only", "permissions": ["agent.read"]})
    assert minted.status_code == 201, minted.text
    run = curl_sh(SWITCHBOARD_URL=served.url, SWITCHBOARD_API_KEY=minted.json()["secret"])
    assert run.returncode != 0
    assert list(printed(run)) == ["agent"]
    assert "POST /v1/sessions failed" in run.stderr
    assert "forbidden" in run.stderr


def test_the_readmes_curl_summary_uses_the_client_and_tool_of_curl_sh() -> None:
    script = SCRIPT.read_text()
    readme = (EXAMPLES.parent / "README.md").read_text()
    summary = readme.split("## The same with curl", 1)[1].split("\n## ", 1)[0]
    [client] = re.findall(r'\\"name\\": \\"(\w+)\\", \\"lifetime', script)
    [tool] = re.findall(r"tool='\{\"name\": \"(\w+)\"", script)
    assert f'"name": "{client}"' in summary, summary
    assert f'"name": "{tool}"' in summary, summary
    assert f"client__{client}__{tool}" in summary, summary
