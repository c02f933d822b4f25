"""Redis restarts under a running deployment (AOF on, appendfsync everysec): the API and the worker
recover by themselves, a run waiting on a client goes on, and an open event stream carries on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.transport.embedded import EmbeddedRedis
from switchboard.processes import Processes, server_env
from tests.e2e.served import scripted_session
from tests.helpers import HIGHLIGHT
from tests.sse import Frames

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[tuple[EmbeddedRedis, Processes, str, str]]:
    redis = EmbeddedRedis(tmp_path / "redis", persistent=True)
    redis.start()
    env, key = server_env(redis.url, ack_timeout_s="60", result_timeout_s="60", step_lease_s="2")
    (tmp_path / "logs").mkdir()
    processes = Processes(env, tmp_path / "logs")
    try:
        _, url = processes.api()
        processes.worker()
        yield redis, processes, url, key
    finally:
        processes.stop_all()
        redis.stop()


async def _until(what: str, attempt: Any, timeout: float = 20) -> Any:
    """Call `attempt` until it returns something truthy (errors count as not yet)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            result = await attempt()
            if result:
                return result
        except httpx.HTTPError:
            pass
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("crash", [False, True], ids=["shutdown", "sigkill"])
async def test_a_redis_restart_is_survived_by_api_worker_runs_and_streams(
    durable: tuple[EmbeddedRedis, Processes, str, str], crash: bool
) -> None:
    redis, processes, url, key = durable
    sid, token = await scripted_session(url, key, "durable")
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=auth, timeout=10) as http:
        body = {"name": "web", "lifetime": {"type": "never"}, "tools": [HIGHLIGHT]}
        web = (await http.post(f"/v1/sessions/{sid}/clients", json=body)).json()
        text = '/call client__web__highlight_row {"row_id": "1"}'
        assert (await http.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": text})).status_code == 200
        async with http.stream("GET", f"/v1/sessions/{sid}/events/stream", params={"after_seq": 0}) as stream:
            frames = Frames(stream)
            while (event := await frames.event(timeout=10))["type"] != "client_tool_dispatched":
                pass
            first_call = event["call_id"]
            call = f"/v1/sessions/{sid}/clients/{web['id']}/calls/{first_call}"

            if crash:
                # appendfsync everysec: a crash loses at most the last second of writes, so the dispatch
                # is given that second to reach the disk first (docs/operating.md, Faults, states the bound).
                await asyncio.sleep(1.5)
                redis.kill()
            else:
                redis.stop()
            redis.start()

            async def answered() -> bool:
                reply = await http.post(f"{call}/result", json={"text": "after the restart"})
                return reply.status_code == 204

            await _until("the result to be taken", answered)
            # The stream that was open across the restart delivers the rest of the run.
            seen = []
            while (event := await frames.event(timeout=20))["type"] != "run_completed":
                seen.append(event["type"])
            assert "tool_result" in seen
        # And the whole loop still works: a new run, a new call, answered, completed.
        assert (await http.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": text})).status_code == 200

        async def dispatched_again() -> list[dict[str, Any]]:
            page = (await http.get(f"/v1/sessions/{sid}/events", params={"order": "desc", "limit": 20})).json()
            return [e for e in page["items"] if e["type"] == "client_tool_dispatched" and e["call_id"] != first_call]

        calls = await _until("a second dispatch", dispatched_again)
        second = f"/v1/sessions/{sid}/clients/{web['id']}/calls/{calls[0]['call_id']}"
        assert (await http.post(f"{second}/result", json={"text": "again"})).status_code == 204

        async def completed_twice() -> bool:
            page = (await http.get(f"/v1/sessions/{sid}/events", params={"order": "asc", "limit": 100})).json()
            items: list[dict[str, Any]] = page["items"]
            return len([e for e in items if e["type"] == "run_completed"]) == 2

        await _until("the second run to complete", completed_twice)
    assert all(process.poll() is None for process in processes.running), processes.tail()
