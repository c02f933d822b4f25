"""What the process tests share: an API and a worker as real processes, and a session of the scripted agent."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from switchboard.processes import Processes, server_env
from tests.api_client import Api
from tests.helpers import SCRIPTED_CONFIG
from tests.stack import Stack


@dataclass
class Served:
    url: str
    key: str
    processes: Processes
    api: subprocess.Popen[bytes]

    def restart_api(self, sig: int = signal.SIGKILL) -> None:
        """Stop the API process (SIGKILL by default: no goodbye to its streams) and start another on the
        same port."""
        self.processes.stop(self.api, sig)
        self.api, _ = self.processes.api(port=int(self.url.rsplit(":", 1)[1]))


@contextlib.contextmanager
def api_and_worker(redis_url: str, logs: Path, **settings: str) -> Iterator[Served]:
    """One API and one worker process on `redis_url` (`settings` are more SWITCHBOARD_* values, without
    the prefix)."""
    env, key = server_env(redis_url, **settings)
    logs.mkdir(parents=True, exist_ok=True)
    processes = Processes(env, logs)
    try:
        api, url = processes.api()
        processes.worker()
        yield Served(url, key, processes, api)
    finally:
        processes.stop_all()


async def scripted_session(url: str, key: str, agent_name: str = "agent", **config: object) -> tuple[str, str]:
    """A new session of a new scripted agent (`config` adds to its version): its id and session token."""
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=10) as admin:
        providers = (await admin.get("/v1/model-providers")).json()["items"]
        scripted = next(p["id"] for p in providers if p["display_name"] == "Scripted")
        agent = (await admin.post("/v1/agents", json={"name": agent_name})).json()
        version = {"model_provider_id": scripted, **SCRIPTED_CONFIG, **config}
        assert (await admin.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
        session = (await admin.post("/v1/sessions", json={"agent_id": agent["id"]})).json()
    return str(session["id"]), str(session["session_token"])


@contextlib.contextmanager
def process_set(redis_url: str, logs: Path, **settings: str) -> Iterator[Processes]:
    """No process yet, ready to start APIs and workers on `redis_url` under a key prefix of their own
    (`settings`: more SWITCHBOARD_* values); its bootstrap key is `env["TEST_API_KEY"]`. All stopped after."""
    env, key = server_env(redis_url, **settings)
    env["TEST_API_KEY"] = key
    logs.mkdir(parents=True, exist_ok=True)
    running = Processes(env, logs)
    try:
        yield running
    finally:
        running.stop_all()


@contextlib.asynccontextmanager
async def process_api(processes: Processes) -> AsyncIterator[Api]:
    """An API process of `processes`, and a test client of it holding the bootstrap key."""
    _, url = processes.api()
    client = Api(Stack(url, processes.env["TEST_API_KEY"], None, None))  # type: ignore[arg-type]
    try:
        yield client
    finally:
        await client.aclose()
