"""A rolling restart under load: two API processes and two workers on one Redis, each sent SIGTERM in
turn (and started again) while sessions stream, post input and answer client calls. No request fails,
no call is lost or answered twice, every run ends once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from broker.transport.embedded import free_port
from switchboard.processes import Processes, server_env
from tests.api_client import ENDS, check_every_run_ended_once, whole_log
from tests.e2e.served import scripted_session
from tests.helpers import HIGHLIGHT

pytestmark = [pytest.mark.processes, pytest.mark.timeout(240)]

SETTINGS = {"ack_timeout_s": "30", "result_timeout_s": "60", "drain_grace_s": "1.5", "drain_retry_ms": "300"}
TEXT = (
    '/call client__web__highlight_row {"row_id": "1"}\n/call client__web__highlight_row {"row_id": "2"}\n'
    '/call calculate {"expression": "6*7"}'
)


@dataclass
class Balancer:
    """What sits in front of API replicas (a Kubernetes Service, the compose proxy): round robin over the
    replicas whose /readyz answers 200, polled every 0.25 s; a request that could not be sent (connection
    refused) goes to the next one. Everything else is the client's: a 5xx or a broken response fails."""

    urls: list[str]
    client: httpx.AsyncClient
    ready: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    resent: int = 0
    _turn: int = 0

    async def watch(self) -> None:
        while True:
            ready = []
            for url in self.urls:
                with contextlib.suppress(httpx.HTTPError):
                    if (await self.client.get(f"{url}/readyz", timeout=1)).status_code == 200:
                        ready.append(url)
            self.ready = ready
            await asyncio.sleep(0.25)

    def pick(self) -> str:
        self._turn += 1
        pool = self.ready or self.urls
        return pool[self._turn % len(pool)]

    async def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        for _ in range(50):
            try:
                response = await self.client.request(method, self.pick() + path, **options)
            except httpx.ConnectError:
                self.resent += 1
                await asyncio.sleep(0.05)
                continue
            except httpx.HTTPError as error:
                self.failures.append(f"{method} {path}: {error!r}")
                raise
            if response.status_code >= 500:
                self.failures.append(f"{method} {path}: {response.status_code} {response.text}")
            return response
        raise AssertionError(f"no replica took {method} {path}")

    @contextlib.asynccontextmanager
    async def stream(self, path: str, headers: dict[str, str]) -> AsyncIterator[httpx.Response]:
        for _ in range(50):
            try:
                async with self.client.stream("GET", self.pick() + path, headers=headers) as response:
                    yield response
                    return
            except httpx.ConnectError:
                self.resent += 1
                await asyncio.sleep(0.05)
        raise AssertionError(f"no replica took the stream {path}")


@dataclass
class Tab:
    """One session's client: streams the session's events through the balancer (resuming with
    Last-Event-ID whenever a replica ends the stream), acks and answers every call dispatched to it."""

    balancer: Balancer
    session_id: str
    token: str
    client_id: str = ""
    last_seq: int = 0
    reconnects: int = 0
    answered: set[str] = field(default_factory=set)
    tail: list[str] = field(default_factory=list)

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **extra}

    async def register(self) -> None:
        body = {"name": "web", "lifetime": {"type": "ttl", "data": {"seconds": 120}}, "tools": [HIGHLIGHT]}
        response = await self.post(f"/v1/sessions/{self.session_id}/clients", body)
        assert response.status_code == 201, response.text
        self.client_id = response.json()["id"]

    async def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        # A key per request, as the SDKs send: a request the balancer sends again cannot act twice.
        headers = self.headers(**{"Idempotency-Key": secrets.token_hex(8)})
        return await self.balancer.request("POST", path, json=body, headers=headers, timeout=15)

    async def listen(self) -> None:
        path = f"/v1/sessions/{self.session_id}/events/stream"
        while True:
            headers = self.headers(**{"Last-Event-ID": str(self.last_seq)})
            async with self.balancer.stream(path, headers) as response:
                assert response.status_code == 200
                try:
                    await self._frames(response)
                except httpx.HTTPError as error:
                    self.balancer.failures.append(f"stream from {response.url.port}: {error!r} after {self.tail!r}")
                    raise
            self.reconnects += 1
            await asyncio.sleep(0.05)

    async def _frames(self, response: httpx.Response) -> None:
        data: list[str] = []
        async for line in response.aiter_lines():
            self.tail = [*self.tail[-3:], line]
            if line.startswith("id: "):
                self.last_seq = int(line[4:])
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                await self._event(json.loads("\n".join(data)))
                data = []

    async def _event(self, event: dict[str, Any]) -> None:
        if event["type"] != "client_tool_dispatched" or event["call_id"] in self.answered:
            return
        self.answered.add(event["call_id"])
        call = f"/v1/sessions/{self.session_id}/clients/{self.client_id}/calls/{event['call_id']}"
        ack = await self.post(f"{call}/ack")
        assert ack.status_code == 200, ack.text
        result = await self.post(f"{call}/result", {"text": f"done {event['arguments']['row_id']}"})
        assert result.status_code == 204, result.text


@pytest.fixture
def replicas(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Processes, str]]:
    env, key = server_env(redis_url, **SETTINGS)
    processes = Processes(env, tmp_path_factory.mktemp("rolling-logs"))
    try:
        yield processes, key
    finally:
        processes.stop_all()


async def roll(processes: Processes, apis: list[Any], ports: list[int], workers: list[Any]) -> list[int]:
    """SIGTERM each API, then each worker, waiting for it to exit and starting its successor; the exit codes."""
    codes = []
    for i, port in enumerate(ports):
        await asyncio.sleep(1.5)
        apis[i].send_signal(signal.SIGTERM)
        codes.append(await asyncio.to_thread(apis[i].wait, 30))
        apis[i], _ = await asyncio.to_thread(processes.api, port, f"api-{i}-next")
    for i in range(len(workers)):
        await asyncio.sleep(1.5)
        workers[i].send_signal(signal.SIGTERM)
        codes.append(await asyncio.to_thread(workers[i].wait, 150))
        workers[i] = processes.worker(name=f"worker-{i}-next")
    await asyncio.sleep(1.5)
    return codes


async def test_sigterm_to_each_replica_in_turn_under_load_fails_no_request_and_loses_no_call(
    replicas: tuple[Processes, str],
) -> None:
    processes, key = replicas
    ports = [free_port(), free_port()]
    apis = [processes.api(port, f"api-{i}")[0] for i, port in enumerate(ports)]
    workers = [processes.worker(name=f"worker-{i}") for i in range(2)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    async with httpx.AsyncClient(timeout=15) as http:
        balancer = Balancer(urls, http)
        background = [asyncio.create_task(balancer.watch())]
        try:
            tabs = []
            for i in range(4):
                sid, token = await scripted_session(
                    urls[0], key, f"rolling-{i}", server_tools=["calculate"], message_concurrency="queue"
                )
                tabs.append(Tab(balancer, sid, token))
            for tab in tabs:
                await tab.register()
            background += [asyncio.create_task(tab.listen()) for tab in tabs]
            rolling = asyncio.create_task(roll(processes, apis, ports, workers))
            posted = dict.fromkeys((tab.session_id for tab in tabs), 0)
            while not rolling.done():
                for tab in tabs:
                    text = {"type": "input", "text": TEXT}
                    response = await tab.post(f"/v1/sessions/{tab.session_id}/events", text)
                    assert response.status_code in (200, 201, 202), response.text
                    posted[tab.session_id] += 1
                await asyncio.sleep(0.2)
            codes = await rolling
            logs = {tab.session_id: await wait_for_runs(balancer, tab, posted[tab.session_id]) for tab in tabs}
        finally:
            # Before the client closes: a listener cut off by it would report a broken stream.
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)

    assert balancer.failures == [], processes.tail()
    # uvicorn ends by raising the SIGTERM it caught again once shutdown is complete; arq exits 0.
    assert set(codes[:2]) <= {0, -signal.SIGTERM}
    assert codes[2:] == [0, 0], processes.tail()
    assert sum(posted.values()) >= 40
    # Every stream was ended by each API's shutdown at least once and resumed on the other replica.
    assert all(tab.reconnects >= 1 for tab in tabs)
    for sid, events in logs.items():
        check_every_run_ended_once(events)
        assert sum(e["type"] == "run_completed" for e in events) == posted[sid]
        assert not [e for e in events if e["type"] == "client_tool_failed"]
        assert sum(e["type"] == "client_tool_dispatched" for e in events) == 2 * posted[sid]
    log_text = processes.tail(lines=400)
    assert "Traceback" not in log_text


async def wait_for_runs(balancer: Balancer, tab: Tab, runs: int) -> list[dict[str, Any]]:
    """The session's whole log once `runs` runs have ended (60 s at most)."""
    path = f"/v1/sessions/{tab.session_id}/events"
    async with asyncio.timeout(60):
        while True:
            events = await whole_log(lambda params: balancer.request("GET", path, params=params, headers=tab.headers()))
            if sum(e["type"] in ENDS for e in events) >= runs:
                return events
            await asyncio.sleep(0.2)
