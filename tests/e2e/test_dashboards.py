"""The Grafana dashboard against a real Prometheus: Debian's `prometheus` scrapes a running deployment (Redis,
an API and a worker process) and Debian's `prometheus-redis-exporter` run as deploy/compose configures
them; after runs with client calls, approvals and failures, every query of every panel of
deploy/grafana/switchboard.json returns data. Skips, naming the binary, where the packages are missing."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from broker.transport.embedded import free_port
from switchboard.processes import Processes
from tests.api_client import Api, Session, of_type, run_over
from tests.e2e.prometheus import (
    Daemon,
    binary,
    dashboard_queries,
    has_data,
    prometheus,
    query,
    redis_exporter,
    scrape_config,
    targets_up,
)
from tests.e2e.served import process_api, process_set
from tests.sse import Frames
from tests.stack import started_redis

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

SCRAPE_S = 1
HIGHLIGHT = "/call client__web__highlight_row"
GATED: dict[str, Any] = {"client_tool_policies": {"client__web__highlight_row": "require_approval"}}
MEMBER = "Switchboard-Pool-Member"


@dataclass
class Deployment:
    processes: Processes
    api: Api
    prometheus: httpx.AsyncClient
    exporter: Daemon


@contextlib.contextmanager
def passworded_redis(data: Path) -> Iterator[tuple[str, str, str]]:
    """A Redis of this test alone (the deployment uses the default key prefix, `sb`, which the exporter's
    compose settings name), with a password as compose gives it: its address without credentials (the
    exporter takes the password apart), the URL with them, and the password."""
    password = secrets.token_urlsafe(16)
    with started_redis(data) as url:
        with redis.Redis.from_url(url) as admin:
            admin.config_set("requirepass", password)
        address = url.removesuffix("/0")
        yield address, url.replace("redis://", f"redis://:{password}@", 1), password


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[Deployment]:
    for name in ("prometheus", "prometheus-redis-exporter"):
        binary(name)
    with passworded_redis(tmp_path / "redis") as (address, url, password):
        settings = {"key_prefix": "sb", "model_attempts": "1", "redis_probe_s": "0.5"}
        with process_set(url, tmp_path / "logs", **settings) as processes:
            async with process_api(processes) as api:
                worker_port = free_port()
                processes.worker(worker_metrics_port=str(worker_port))
                with redis_exporter(address, password, tmp_path) as exporter:
                    api_address = api.stack.url.removeprefix("http://")
                    targets = {
                        "switchboard-api": api_address,
                        "switchboard-cluster": api_address,
                        "switchboard-worker": f"127.0.0.1:{worker_port}",
                        "redis": exporter.url.removeprefix("http://"),
                    }
                    with prometheus(scrape_config(targets, SCRAPE_S), tmp_path / "prometheus") as server:
                        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
                            yield Deployment(processes, api, client, exporter)


async def all_up(client: httpx.AsyncClient, jobs: int, timeout: float = 20) -> None:
    loop = asyncio.get_running_loop()
    until = loop.time() + timeout
    while True:
        health = await targets_up(client)
        if len(health) == jobs and all(state == "up" for state in health.values()):
            return
        assert loop.time() < until, f"scrape targets not all up: {health}"
        await asyncio.sleep(0.2)


async def answered(api: Api, *, decision: str | None = None) -> None:
    """A run whose client call is answered: acked then given its result; with `decision`, the call waits
    for an approval first (denied: the model is told, and nothing reaches the client)."""
    session = await api.session(**(GATED if decision else {}))
    web = await api.register(session)
    await api.send(session, HIGHLIGHT)
    if decision:
        events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")), timeout=15)
        call_id = of_type(events, "approval_requested")[0]["call_id"]
        async with api.as_session(session) as client:
            path = f"/v1/sessions/{session.id}/approvals/{call_id}"
            decided = await client.post(path, json={"decision": decision})
        assert decided.status_code == 200, decided.text
    if decision != "deny":
        events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")), timeout=15)
        call_id = of_type(events, "client_tool_dispatched")[0]["call_id"]
        assert (await api.call(session, web["id"], call_id, "ack")).status_code == 200
        assert (await api.call(session, web["id"], call_id, "result", text="highlighted")).status_code == 204
    events = await api.wait_for(session, run_over, timeout=15)
    assert of_type(events, "run_completed"), [e["type"] for e in events]


async def client_gone(api: Api) -> None:
    """A call whose client leaves before answering: the call fails (`client_gone`), the run goes on."""
    session = await api.session()
    web = await api.register(session)
    await api.send(session, HIGHLIGHT)
    await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")), timeout=15)
    async with api.as_session(session) as client:
        assert (await client.delete(f"/v1/sessions/{session.id}/clients/{web['id']}")).status_code == 204
    events = await api.wait_for(session, run_over, timeout=15)
    assert [r["is_error"] for r in of_type(events, "tool_result")] == [True]


async def model_fails(api: Api) -> None:
    session = await api.session()
    await api.send(session, "/fail the provider is down")
    events = await api.wait_for(session, run_over, timeout=15)
    assert of_type(events, "run_failed"), [e["type"] for e in events]


async def pooled(api: Api) -> None:
    """A call taken by a pool member from the registration's call stream: the stream and its group stay
    (the registration is live), which the exporter reads."""
    session = await api.session()
    web = await api.register(session)
    path = f"/v1/sessions/{session.id}/clients/{web['id']}"
    async with api.as_session(session) as http, http.stream("GET", f"{path}/calls/stream") as stream:
        assert stream.status_code == 200
        member = stream.headers[MEMBER]
        await api.send(session, HIGHLIGHT)
        call_id = (await Frames(stream).event(timeout=15))["call_id"]
        assert (await http.post(f"{path}/calls/{call_id}/ack", headers={MEMBER: member})).status_code == 200
        assert (await http.post(f"{path}/calls/{call_id}/result", json={"text": "done"})).status_code == 204
    assert of_type(await api.wait_for(session, run_over, timeout=15), "run_completed")


async def drive(api: Api) -> Session:
    """Runs of every kind at once, while a tab follows one session's events (an open stream)."""
    watched = await api.session()
    async with api.stream(watched):
        await asyncio.gather(
            answered(api),
            answered(api, decision="allow"),
            answered(api, decision="deny"),
            client_gone(api),
            model_fails(api),
            pooled(api),
        )
    return watched


async def test_every_panel_of_the_dashboard_has_data(deployment: Deployment) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 25
    prom = deployment.prometheus
    await all_up(prom, jobs=4)
    # After the first scrape of every target, so each counter's rise falls inside the rates' windows.
    await drive(deployment.api)
    loop = asyncio.get_running_loop()
    until = loop.time() + 30
    missing = queries
    while missing and loop.time() < until:
        await asyncio.sleep(SCRAPE_S)
        missing = [(title, expr) for title, expr in missing if not has_data(await query(prom, expr))]
    assert not missing, f"panels with no data: {missing}\n{await targets_up(prom)}"
    # The exporter's settings check only what they mean to: a key they name that is no stream (a
    # session's calls hash) would cost a command and an error line each scrape.
    errors = [line for line in deployment.exporter.output().splitlines() if "level=error" in line]
    assert not errors, errors
