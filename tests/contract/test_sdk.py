"""The real `subako` SDK (0.1.1, Python 3.12+), unchanged, against real API and worker processes."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.transport.embedded import free_port
from switchboard.processes import Processes, server_env

pytestmark = [pytest.mark.contract, pytest.mark.timeout(300), pytest.mark.both_redis]

ROOT = Path(__file__).resolve().parents[2]
SDK_VENV = ROOT / ".venv-sdk"
SDK_PACKAGE = "subako==0.1.1"
SCENARIOS = [
    "admin_routes",
    "tool_round_trip",
    "parallel_names_and_errors",
    "cancel_and_leave",
    "history_and_positions",
    "ttl_client_stays_alive",
    "raw_register_shapes",
    "approvals_through_the_sdk",
    "approval_deadline_through_the_sdk",
    "deleted_session_fails_the_stream",
    "reconnect_after_restart",
    "extensions_in_use",
    "mcp_in_use",
    "front_doors_in_use",
    "extension_formats_listed",
    "cloud_provider_listed",
    "waiting_call_taken_by_the_sdk",
    "input_requests_while_followed",
]


def _pythons() -> list[str]:
    """Interpreters of Python 3.12 or newer that run: pyenv's 3.12 first, then any on PATH."""
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    found: list[str | None] = []
    for minor in ("3.12", "3.13"):
        found += sorted(glob.glob(f"{pyenv_root}/versions/{minor}.*/bin/python{minor}"), reverse=True)
    found += [shutil.which(name) for name in ("python3.12", "python3.13")]
    # A pyenv shim for a version that is not selected exists on PATH but does not run.
    return [p for p in found if p and subprocess.run([p, "--version"], capture_output=True).returncode == 0]


def sdk_venv_python() -> str:
    """The virtualenv's python with `subako` installed (made once, kept in .venv-sdk); skips the test when
    no Python 3.12 exists. Held under a lock: tests of other xdist workers (tests/examples) use it too."""
    python = SDK_VENV / "bin" / "python"
    lock = Path(tempfile.gettempdir()) / f"switchboard-sdk-venv-{hashlib.sha256(bytes(SDK_VENV)).hexdigest()[:12]}.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if python.exists() and subprocess.run([python, "-c", "import subako"], capture_output=True).returncode == 0:
            return str(python)
        interpreters = _pythons()
        if not interpreters:
            pytest.skip("no Python 3.12 or newer on PATH or under pyenv: the subako SDK requires Python >= 3.12")
        subprocess.run([interpreters[0], "-m", "venv", "--clear", str(SDK_VENV)], check=True)
        install = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", SDK_PACKAGE],
            capture_output=True,
            text=True,
        )
        assert install.returncode == 0, f"installing {SDK_PACKAGE} failed:\n{install.stdout}\n{install.stderr}"
        return str(python)


@pytest.fixture(scope="module")
def sdk_python() -> str:
    return sdk_venv_python()


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """The tests' MCP server (tests/mcp_servers.py) over Streamable HTTP, in a process of its own, and its
    port: started, not yet listening (it takes seconds to start, the API and worker start meanwhile)."""
    port = free_port()
    log = (tmp_path_factory.mktemp("mcp") / "kit.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp_servers", "http", str(port)], cwd=ROOT, stdout=log, stderr=log
    )
    try:
        yield port, server
    finally:
        server.terminate()
        server.wait(10)
        log.close()


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        assert process.poll() is None, "the MCP server exited"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listened on {port} within {timeout:g} s")


@pytest.fixture(scope="module")
def sdk_results(
    sdk_python: str,
    redis_url: str,
    mcp_server: tuple[int, subprocess.Popen[bytes]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, dict[str, object]]]:
    # The tests' MCP server listens on 127.0.0.1: a grant may reach it only with private addresses allowed.
    env, key = server_env(redis_url, ack_timeout_s="10", result_timeout_s="30", provider_allow_private="true")
    processes = Processes(env, tmp_path_factory.mktemp("sdk-logs"))
    try:
        processes.worker()
        _, url = processes.api()
        # The API the restart scenario restarts, while the others go on on the first.
        restarted = processes.api(name="api-restart")
        port, mcp = mcp_server
        wait_for_port(port, mcp)
        yield _drive(sdk_python, url, key, processes, restarted, f"http://127.0.0.1:{port}/mcp")
    finally:
        processes.stop_all()


def _drive(
    python: str,
    url: str,
    key: str,
    processes: Processes,
    restarted: tuple[subprocess.Popen[bytes], str],
    mcp_url: str,
) -> dict[str, dict[str, object]]:
    script = Path(__file__).with_name("sdk_scenarios.py")
    results: dict[str, dict[str, object]] = {}
    api, restart_url = restarted
    env = {"SWITCHBOARD_URL": url, "SWITCHBOARD_RESTART_URL": restart_url, "SWITCHBOARD_MCP_URL": mcp_url}
    with subprocess.Popen(
        [python, str(script), *SCENARIOS],
        env={**os.environ, **env, "SWITCHBOARD_API_KEY": key},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as driver:
        assert driver.stdin is not None
        assert driver.stdout is not None
        for line in driver.stdout:
            message = json.loads(line)
            if message.get("pause") == "restart-api":
                processes.stop(api)
                api, _ = processes.api(int(restart_url.rsplit(":", 1)[1]), name="api-restarted")
                driver.stdin.write("go\n")
                driver.stdin.flush()
            else:
                results[message["scenario"]] = message
        stderr = driver.stderr.read() if driver.stderr else ""
    results["_log"] = {"ok": True, "detail": f"{stderr}\n{processes.tail()}"}
    return results


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_sdk_scenario(sdk_results: dict[str, dict[str, object]], scenario: str) -> None:
    result = sdk_results.get(scenario)
    assert result is not None, f"the scenario did not report:\n{sdk_results['_log']['detail']}"
    assert result["ok"], f"{result['detail']}\n{sdk_results['_log']['detail']}"
