"""examples/quickstart.py, run as a reader would: the real subako SDK, in the contract tests' Python 3.12
virtualenv, against API and worker processes."""

from __future__ import annotations

import os
import subprocess

import pytest

from broker.transport.embedded import free_port
from tests.contract.test_sdk import sdk_venv_python
from tests.e2e.served import Served
from tests.examples.support import EXAMPLES, listed, of_type, session_log, text_of

pytestmark = [pytest.mark.processes, pytest.mark.contract, pytest.mark.timeout(180)]

QUICKSTART = EXAMPLES / "quickstart.py"


@pytest.fixture(scope="module")
def sdk_python() -> str:
    return sdk_venv_python()


def quickstart(python: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The script with `env` over this environment (SWITCHBOARD_* of the test runner's own left out)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    return subprocess.run([python, str(QUICKSTART)], env={**base, **env}, capture_output=True, text=True, timeout=90)


def test_the_quickstart_serves_its_tool_prints_the_answer_and_reuses_its_agent(served: Served, sdk_python: str) -> None:
    env = {"SWITCHBOARD_URL": served.url, "SWITCHBOARD_API_KEY": served.key}
    first = quickstart(sdk_python, **env)
    assert first.returncode == 0, first.stderr
    second = quickstart(sdk_python, **env)
    assert second.returncode == 0, second.stderr

    # The second run found the agent the first one made, by name.
    agents = [a for a in listed(served, "/v1/agents") if a["name"] == "scripted"]
    assert len(agents) == 1, agents
    sessions = listed(served, "/v1/sessions")
    assert len(sessions) == 2
    assert {s["agent_id"] for s in sessions} == {agents[0]["id"]}

    for run, session in zip((second, first), sessions, strict=True):
        events = session_log(served, session["id"])
        [call] = of_type(events, "tool_call")
        [result] = of_type(events, "tool_result")
        assert call["name"] == "client__web__highlight_row"
        assert call["arguments"] == {"row_id": "42"}
        # The tool ran in the script's own process, and the model's answer is what the script printed.
        assert not result["is_error"], result
        assert "42" in text_of(result)
        answer = of_type(events, "message_assistant")[-1]
        assert run.stdout.strip() == text_of(answer)
        assert text_of(answer) == f"{call['name']}: {text_of(result)}"
        assert of_type(events, "run_completed")


def test_the_quickstart_without_a_key_says_which_variable_to_set(sdk_python: str) -> None:
    run = quickstart(sdk_python, SWITCHBOARD_URL=f"http://127.0.0.1:{free_port()}")
    assert run.returncode == 1
    assert "SWITCHBOARD_API_KEY" in run.stderr
    assert run.stdout == ""


def test_the_quickstart_with_a_wrong_key_exits_1_with_the_servers_answer(served: Served, sdk_python: str) -> None:
    run = quickstart(sdk_python, SWITCHBOARD_URL=served.url, SWITCHBOARD_API_KEY="swb_ak_" + "x" * 40)
    assert run.returncode == 1
    assert "401 unauthorized" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stdout == ""


def test_the_quickstart_without_a_server_says_it_cannot_reach_it(sdk_python: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    run = quickstart(sdk_python, SWITCHBOARD_URL=url, SWITCHBOARD_API_KEY="swb_ak_" + "x" * 40)
    assert run.returncode == 1
    assert f"cannot reach {url}" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
