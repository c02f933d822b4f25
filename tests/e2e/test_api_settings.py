"""A real `switchboard api` process builds the API's settings alone: started where a worker's settings are
set, the provider keys among them and some invalid for a worker, it serves, and lists no provider a key
in its environment would stand for; a worker started in the same environment refuses those settings."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from broker.services.providers import SCRIPTED_PROVIDER_ID
from switchboard.processes import Processes, server_env

pytestmark = [pytest.mark.processes, pytest.mark.timeout(60)]

# A worker's settings: its provider keys, and values a worker's settings refuse (at least 1 step; a port
# is a number). Building WorkerSettings (or the union of the roles) from this environment fails.
WORKER_ONLY = {
    "openai_api_key": "sk-openai-only-the-worker-may-hold-this",
    "anthropic_api_key": "sk-ant-only-the-worker-may-hold-this",
    "max_steps": "0",
    "worker_metrics_port": "not-a-port",
}


def test_an_api_process_never_builds_a_workers_settings(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env, key = server_env(redis_url)
    env |= {f"SWITCHBOARD_{name.upper()}": value for name, value in WORKER_ONLY.items()}
    processes = Processes(env, tmp_path_factory.mktemp("api-settings-logs"))
    try:
        _, url = processes.api()
        listed = httpx.get(f"{url}/v1/model-providers", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert listed.status_code == 200, listed.text
        # No worker offers a platform provider, and the keys in the API's environment make none appear.
        assert [provider["id"] for provider in listed.json()["items"]] == [SCRIPTED_PROVIDER_ID]
    finally:
        processes.stop_all()
    assert "bad setting" not in processes.tail()
    worker = subprocess.run(
        [sys.executable, "-m", "switchboard", "worker"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert worker.returncode != 0
    assert "bad setting" in worker.stderr
    assert "max_steps" in worker.stderr
