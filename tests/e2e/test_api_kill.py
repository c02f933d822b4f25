"""An API process SIGKILLed mid-session: requests retried with their Idempotency-Key after it comes back
act once, and a stream resumed with Last-Event-ID sees every event once, in order."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.served import Served, api_and_worker, scripted_session
from tests.helpers import HIGHLIGHT
from tests.sse import Frames

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[Served]:
    with api_and_worker(redis_url, tmp_path / "logs", ack_timeout_s="30", result_timeout_s="30") as running:
        yield running


async def _events_after(http: httpx.AsyncClient, sid: str, seq: int) -> list[dict[str, object]]:
    page = await http.get(f"/v1/sessions/{sid}/events", params={"order": "asc", "limit": 100, "after_seq": seq})
    items: list[dict[str, object]] = page.json()["items"]
    return items


async def test_retries_across_an_api_kill_act_once_and_the_stream_resumes_exactly(served: Served) -> None:
    sid, token = await scripted_session(served.url, served.key, "killed")
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=served.url, headers=auth, timeout=10) as http:
        body = {"name": "web", "lifetime": {"type": "never"}, "tools": [HIGHLIGHT]}
        web = (await http.post(f"/v1/sessions/{sid}/clients", json=body)).json()
        text = '/call client__web__highlight_row {"row_id": "1"}'
        sent = {"type": "input", "text": text}
        first = await http.post(f"/v1/sessions/{sid}/events", json=sent, headers={"Idempotency-Key": "input-1"})
        assert first.status_code == 200
        seen: list[int] = []
        async with http.stream("GET", f"/v1/sessions/{sid}/events/stream", params={"after_seq": 0}) as stream:
            frames = Frames(stream)
            while (event := await frames.event())["type"] != "client_tool_dispatched":
                seen.append(event["seq"])
            seen.append(event["seq"])
        call = f"/v1/sessions/{sid}/clients/{web['id']}/calls/{event['call_id']}"
        result = await http.post(f"{call}/result", json={"text": "lit"}, headers={"Idempotency-Key": "result-1"})
        assert result.status_code == 204

        served.restart_api(signal.SIGKILL)

        # The same requests again, as a client that never saw the answers would send them: replayed.
        again = await http.post(f"/v1/sessions/{sid}/events", json=sent, headers={"Idempotency-Key": "input-1"})
        assert (again.status_code, again.json()) == (200, first.json())
        replay = await http.post(f"{call}/result", json={"text": "lit"}, headers={"Idempotency-Key": "result-1"})
        assert replay.status_code == 204
        # The stream, resumed where it stopped, picks up exactly after the last event it had.
        last = seen[-1]
        headers = {"Last-Event-ID": str(last)}
        async with http.stream("GET", f"/v1/sessions/{sid}/events/stream", headers=headers) as stream:
            frames = Frames(stream)
            while (event := await frames.event())["type"] != "run_completed":
                seen.append(event["seq"])
            seen.append(event["seq"])
        events = await _events_after(http, sid, 0)
    assert seen == [e["seq"] for e in events]  # every event once, in order, across the kill
    kinds = [e["type"] for e in events]
    assert kinds.count("run_queued") == 1
    assert kinds.count("tool_result") == 1
