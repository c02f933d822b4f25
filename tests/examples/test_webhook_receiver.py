"""examples/webhook_receiver.py, run as an operator would: it registers its endpoint, a run completes, and
it prints the delivery it verified with `standardwebhooks`; a forged one it refuses."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator

import httpx
import pytest

from broker.transport.embedded import free_port
from tests.e2e.served import Served, api_and_worker, scripted_session
from tests.examples.support import EXAMPLES

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120), pytest.mark.xdist_group("webhook_receiver")]


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # The receiver listens on the loopback here, as it would on a developer's machine.
    logs = tmp_path_factory.mktemp("webhook-receiver-logs")
    with api_and_worker(redis_url, logs, provider_allow_private="true") as running:
        yield running


async def _line(stream: asyncio.StreamReader, starting: str) -> str:
    while True:
        line = (await asyncio.wait_for(stream.readline(), timeout=30)).decode()
        assert line, f"the receiver ended before printing {starting!r}"
        if line.startswith(starting):
            return line.strip()


async def test_it_verifies_and_prints_a_delivery(served: Served) -> None:
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHBOARD_", "WEBHOOK_"))}
    env = {**base, "SWITCHBOARD_URL": served.url, "SWITCHBOARD_API_KEY": served.key, "PORT": str(port)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / "webhook_receiver.py"),
        env={**env, "EXIT_AFTER": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        assert (await _line(process.stdout, "registered endpoint")).endswith(f"http://127.0.0.1:{port}/webhooks")
        await _line(process.stdout, "listening on")
        async with httpx.AsyncClient(timeout=10) as http:
            forged = await http.post(
                f"http://127.0.0.1:{port}/webhooks",
                content=json.dumps({"type": "run.completed", "data": {}}),
                headers={"webhook-id": "msg_x", "webhook-timestamp": "1", "webhook-signature": "v1,AAAA"},
            )
        assert forged.status_code == 400
        session_id, token = await scripted_session(served.url, served.key)
        async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {token}"}) as client:
            sent = await client.post(f"/v1/sessions/{session_id}/events", json={"type": "input", "text": "hello"})
            assert sent.status_code == 200, sent.text
        line = await _line(process.stdout, "run.completed")
        assert f"session={session_id}" in line
        assert await asyncio.wait_for(process.wait(), timeout=30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
