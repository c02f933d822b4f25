"""An API process SIGKILLed mid-session: requests retried with their Idempotency-Key after it comes back
act once, and a stream resumed with Last-Event-ID sees every event once, in order."""

from __future__ import annotations

import asyncio
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


async def _keyed_post(http: httpx.AsyncClient, path: str, body: dict[str, object], key: str) -> httpx.Response:
    """POST until an answer comes back, always under the same Idempotency-Key (the API may be down)."""
    for _ in range(100):
        try:
            return await http.post(path, json=body, headers={"Idempotency-Key": key})
        except httpx.TransportError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"no answer from {path}")


async def _follow(http: httpx.AsyncClient, sid: str, client_id: str, runs: int) -> list[int]:
    """One session's client: stream its events (reconnecting with Last-Event-ID after any drop), answer
    each call with a keyed, retried result, until `runs` runs have completed; the seqs seen."""
    seen: list[int] = []
    completed = 0
    while completed < runs:
        headers = {"Last-Event-ID": str(seen[-1])} if seen else {}
        params = {} if seen else {"after_seq": "0"}
        try:
            async with http.stream("GET", f"/v1/sessions/{sid}/events/stream", params=params, headers=headers) as s:
                frames = Frames(s)
                while completed < runs:
                    event = await frames.event(timeout=20)
                    seen.append(event["seq"])
                    if event["type"] == "client_tool_dispatched":
                        call = f"/v1/sessions/{sid}/clients/{client_id}/calls/{event['call_id']}/result"
                        answer = await _keyed_post(http, call, {"text": "ok"}, f"result-{event['call_id']}")
                        assert answer.status_code == 204, answer.text
                    elif event["type"] == "run_completed":
                        completed += 1
        except (httpx.TransportError, EOFError):
            await asyncio.sleep(0.2)
    return seen


async def test_many_clients_streaming_and_posting_through_an_api_kill_see_everything_once(served: Served) -> None:
    runs = 6
    # One run per input (`queue`), so every input must end in exactly one run.
    sessions = [await scripted_session(served.url, served.key, f"s{i}", message_concurrency="queue") for i in range(12)]
    text = '/call client__web__highlight_row {"row_id": "1"}\n/call client__web__highlight_row {"row_id": "2"}'
    followers = []
    clients = []
    for sid, token in sessions:
        http = httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        clients.append(http)
        body = {"name": "web", "lifetime": {"type": "never"}, "tools": [HIGHLIGHT]}
        web = (await http.post(f"/v1/sessions/{sid}/clients", json=body)).json()
        followers.append(asyncio.create_task(_follow(http, sid, web["id"], runs)))
    try:
        for n in range(runs):
            for (sid, _), http in zip(sessions, clients, strict=True):
                sent = await _keyed_post(http, f"/v1/sessions/{sid}/events", {"type": "input", "text": text}, f"in-{n}")
                assert sent.status_code == 200, sent.text
            if n == runs // 2:
                await asyncio.to_thread(served.restart_api, signal.SIGKILL)
        seen = await asyncio.wait_for(asyncio.gather(*followers), timeout=90)
        for (sid, _), http, got in zip(sessions, clients, seen, strict=True):
            events = await _events_after(http, sid, 0)
            # Every event the log has up to the last run's end, once, in order, across the kill.
            assert got == [e["seq"] for e in events][: len(got)]
            kinds = [e["type"] for e in events]
            assert kinds.count("run_queued") == runs  # retried inputs acted once
            assert kinds.count("tool_result") == 2 * runs  # retried results acted once
            assert "client_tool_failed" not in kinds
    finally:
        for task in followers:
            task.cancel()
        for http in clients:
            await http.aclose()
