"""What an operator reads: the deployment's figures on /metrics/cluster, each process's own /metrics, JSON
log lines naming the session, client and call, and a stream ended by a shutdown telling its reader to
come back soon."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from typing import Any

import httpx
import pytest

from broker.transport.embedded import free_port
from switchboard.processes import Processes, server_env
from tests.api_client import ENDS
from tests.e2e.served import scripted_session
from tests.helpers import HIGHLIGHT, Exposition
from tests.sse import Frames

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

TTL = {"type": "ttl", "data": {"seconds": 60}}


async def settled_figures(http: httpx.AsyncClient) -> Exposition:
    async with asyncio.timeout(10):
        while True:
            figures = Exposition((await http.get("/metrics/cluster")).text)
            if figures("switchboard_queue_depth") == 0:
                return figures
            await asyncio.sleep(0.05)


async def run_to_end(frames: Frames, answer: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        event = await frames.event(timeout=15)
        seen.append(event)
        if event["type"] == "client_tool_dispatched":
            await answer(event)
        if event["type"] in ENDS:
            return seen


async def test_figures_count_every_call_by_outcome_and_logs_name_the_ids(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env, key = server_env(redis_url, ack_timeout_s="1", access_log="true")
    logs = tmp_path_factory.mktemp("ops-logs")
    processes = Processes(env, logs)
    worker_port = free_port()
    try:
        _, url = processes.api()
        processes.worker(worker_metrics_port=str(worker_port), host="127.0.0.1")
        sid, token = await scripted_session(url, key, "figures")
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
            web = (
                await http.post(
                    f"/v1/sessions/{sid}/clients", json={"name": "web", "lifetime": TTL, "tools": [HIGHLIGHT]}
                )
            ).json()
            calls = f"/v1/sessions/{sid}/clients/{web['id']}/calls"

            async def answer_first_only(event: dict[str, Any]) -> None:
                # Row "a" is answered; row "b" is never acked and fails with ack_timeout.
                if event["arguments"]["row_id"] == "a":
                    assert (await http.post(f"{calls}/{event['call_id']}/ack")).status_code == 200
                    assert (
                        await http.post(f"{calls}/{event['call_id']}/result", json={"text": "ok"})
                    ).status_code == 204

            async def leave(event: dict[str, Any]) -> None:
                assert (await http.delete(f"/v1/sessions/{sid}/clients/{web['id']}")).status_code == 204

            async with http.stream("GET", f"/v1/sessions/{sid}/events/stream", params={"after_seq": 0}) as stream:
                frames = Frames(stream)
                text = (
                    '/call client__web__highlight_row {"row_id": "a"}\n/call client__web__highlight_row {"row_id": "b"}'
                )
                await http.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": text})
                first = await run_to_end(frames, answer_first_only)
                await http.post(
                    f"/v1/sessions/{sid}/events",
                    json={"type": "input", "text": '/call client__web__highlight_row {"row_id": "c"}'},
                )
                second = await run_to_end(frames, leave)
            assert [e["reason"] for e in first + second if e["type"] == "client_tool_failed"] == [
                "ack_timeout",
                "client_gone",
            ]
            # arq keeps a job in its queue until the job has finished: the step that ended the run may
            # still be there for a moment.
            cluster = await settled_figures(http)
            own = Exposition((await http.get("/metrics")).text)
            worker = Exposition((await http.get(f"http://127.0.0.1:{worker_port}/metrics")).text)
    finally:
        processes.stop_all()

    assert cluster("switchboard_calls_dispatched_total") == 3
    assert cluster("switchboard_calls_acked_total") == 1
    assert cluster("switchboard_calls_answered_total") == 1
    assert cluster("switchboard_calls_failed_total", reason="ack_timeout") == 1
    assert cluster("switchboard_calls_failed_total", reason="client_gone") == 1
    assert cluster("switchboard_calls_failed_total", reason="result_timeout") == 0
    assert cluster("switchboard_call_dispatch_to_ack_seconds_count") == 1
    assert cluster("switchboard_call_ack_to_result_seconds_count") == 1
    assert cluster("switchboard_call_dispatch_to_ack_seconds_bucket", le="+Inf") == 1
    assert cluster("switchboard_clients_active") == 0
    assert cluster("switchboard_runs_started_total") == 2
    assert cluster("switchboard_runs_ended_total", outcome="completed") == 2
    assert cluster("switchboard_runs", state="active") == 0
    assert cluster("switchboard_queue_depth") == 0
    # Two runs of two steps each, every one observed by the worker that ran it.
    assert worker("switchboard_step_seconds_count", outcome="ok") == 4
    assert worker("switchboard_redis_rtt_seconds_count") >= 1
    assert own("switchboard_redis_rtt_seconds_count") >= 1
    assert own("switchboard_open_streams") == 0
    assert own.has("process_resident_memory_bytes")

    lines = [json.loads(line) for line in (logs / "api.log").read_text().splitlines() if line.startswith("{")]
    acks = [line for line in lines if "/ack " in line["msg"]]
    assert acks, lines[-5:]
    assert {"session_id": sid, "client_id": web["id"]}.items() <= acks[0].items()
    assert acks[0]["call_id"]
    assert acks[0]["level"] == "info"
    worker_lines = (logs / "worker.log").read_text().splitlines()
    assert worker_lines
    assert all(line.startswith("{") for line in worker_lines), worker_lines[:3]


async def test_a_stream_ended_by_sigterm_is_told_to_come_back_soon(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env, key = server_env(redis_url, drain_grace_s="2", drain_retry_ms="400")
    processes = Processes(env, tmp_path_factory.mktemp("drain-logs"))
    try:
        api, url = processes.api()
        sid, token = await scripted_session(url, key, "drain")
        auth = {"Authorization": f"Bearer {token}"}
        async with (
            httpx.AsyncClient(base_url=url, headers=auth, timeout=10) as http,
            http.stream("GET", f"/v1/sessions/{sid}/events/stream") as stream,
        ):
            chunks = stream.aiter_text()
            first = await anext(chunks)
            assert "retry: 3000" in first
            api.send_signal(signal.SIGTERM)
            rest = ""
            started = time.monotonic()
            async with asyncio.timeout(10):
                async for chunk in chunks:
                    rest += chunk
        assert time.monotonic() - started < 5
        retry = [line for line in rest.splitlines() if line.startswith("retry: ")]
        assert len(retry) == 1, rest
        assert 40 <= int(retry[0].split()[1]) <= 400
        # uvicorn ends by raising the signal it caught again, once shutdown is complete.
        assert api.wait(timeout=15) in (0, -signal.SIGTERM)
    finally:
        processes.stop_all()
    assert "Application shutdown complete" in processes.tail()
    assert "Traceback" not in processes.tail()
