"""Streams that never read cost the API a bounded amount of memory each, and other sessions are served
as before while they hang on."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api_client import whole_log
from tests.e2e.served import Served, api_and_worker, scripted_session

pytestmark = [pytest.mark.processes, pytest.mark.timeout(240)]

READERS = 1_000
INPUTS = 300
INPUT_CHARS = 20_000
# What 1,000 readers that never read may add to the API process, all told (docs/http-api.md, Limits).
LIMIT_MIB = 200


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[Served]:
    uncapped = {"max_streams_per_session": "0", "max_streams_per_credential": "0", "rate_limit_per_s": "0"}
    with api_and_worker(redis_url, tmp_path / "logs", **uncapped) as running:
        yield running


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def stuck_reader(url: str, session_id: str, token: str) -> socket.socket:
    """A stream request from a client that never reads a byte of the answer."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    request = (
        f"GET /v1/sessions/{session_id}/events/stream HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    sock.sendall(request.encode())
    return sock


async def test_a_thousand_streams_that_never_read_stay_within_the_stated_memory(served: Served) -> None:
    session_id, token = await scripted_session(served.url, served.key)
    other_id, other_token = await scripted_session(served.url, served.key)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=30) as http:
        await http.post(f"/v1/sessions/{session_id}/events", json={"type": "input", "text": "warm up"})
        await asyncio.sleep(1)
        before = rss_mib(served.api.pid)
        readers = [stuck_reader(served.url, session_id, token) for _ in range(READERS)]
        try:
            text = "x" * INPUT_CHARS
            for _ in range(INPUTS):
                answer = await http.post(f"/v1/sessions/{session_id}/events", json={"type": "input", "text": text})
                assert answer.status_code == 200, answer.text
            # Every input has reached the log, and the stuck streams have had time to fill what they may.
            await asyncio.sleep(3)
            grown = rss_mib(served.api.pid) - before

            # Another session is served as before meanwhile.
            async with httpx.AsyncClient(
                base_url=served.url, headers={"Authorization": f"Bearer {other_token}"}, timeout=30
            ) as other:
                started = time.monotonic()
                path = f"/v1/sessions/{other_id}/events"
                await other.post(path, json={"type": "input", "text": "still there?"})
                while True:
                    events = await whole_log(lambda params: other.get(path, params=params))
                    if any(e["type"] == "run_completed" for e in events):
                        break
                    assert time.monotonic() - started < 10, "the other session was not served"
                    await asyncio.sleep(0.05)
        finally:
            for reader in readers:
                reader.close()
    assert grown < LIMIT_MIB, f"the API grew {grown:.1f} MiB with {READERS} stuck readers"
