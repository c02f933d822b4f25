"""Hostile MCP servers an agent's version grants (bench/hostile_servers.py), each reproducing a red team's
finding: calls that hold every worker slot, timeouts that keep-alives stretch or a quiet server cuts
short, lists and notifications without a bound, grants without number."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError

from bench.hostile_servers import Hostile, HostileServer, Seen
from common.addresses import ProviderAddresses
from switchboard.settings import Settings
from tests.api_client import Api, Event, Session, of_type, run_over, running_api
from tests.helpers import SCRIPTED_CONFIG
from tests.stack import serve_asgi
from workers.config import McpGrant
from workers.mcp import flow, guard, hub
from workers.mcp.hub import McpHub
from workers.mcp.mapped import Mapped
from workers.mcp.wire import MAX_LISTING_BYTES
from workers.metrics import WorkerMetrics
from workers.settings import WorkerSettings

pytestmark = pytest.mark.private_providers


@contextlib.asynccontextmanager
async def hostile(server: Hostile) -> AsyncIterator[tuple[str, Seen]]:
    """The server on a free port (its URL and what it saw); it outlives whatever connects to it."""
    made = HostileServer(server)
    async with serve_asgi(made.app(), timeout_graceful_shutdown=1) as url:
        yield f"{url}/mcp", made.seen


@contextlib.asynccontextmanager
async def against(
    server: Hostile, settings: Settings, redis_url: str, api_key: str, **update: object
) -> AsyncIterator[tuple[Api, str, Seen]]:
    """A stack of its own (`update` to its settings) and the server, which stops after the stack's worker."""
    async with hostile(server) as (url, seen), running_api(settings, redis_url, api_key, update) as api:
        yield api, url, seen


def grant(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "h", "url": url, "default_policy": "allow", **extra}


def in_call_order(events: list[Event]) -> list[Event]:
    """The tool results in the order of their calls (server calls end in any order)."""
    order = [e["call_id"] for e in of_type(events, "tool_call")]
    return sorted(of_type(events, "tool_result"), key=lambda r: order.index(r["call_id"]))


def texts(result: Event) -> list[str]:
    return [block["data"]["text"] for block in result["content"] if block["type"] == "text"]


async def answer(api: Api, session: Session, text: str, timeout: float = 20) -> list[Event]:
    """Send `text` and wait for its run to end: the events of that run."""
    run_id = (await api.send(session, text))["run_id"]
    events = await api.wait_for(
        session, lambda es: any(e.get("run_id") == run_id for e in es if run_over([e])), timeout
    )
    started = next(i for i, e in enumerate(events) if e.get("run_id") == run_id)
    return events[started:]


async def until(check: Any, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_version_with_33_grants_is_refused_naming_the_field_and_the_limit(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    async with running_api(settings, redis_url, api_key, {}, worker=False) as api:
        agent = (await api.key.post("/v1/agents", json={"name": "many"})).json()
        version = {"model_provider_id": await api.scripted_provider_id(), **SCRIPTED_CONFIG}
        grants = [
            {"name": f"g{n}", "url": f"https://mcp{n}.example.com/mcp", "default_policy": "allow"} for n in range(33)
        ]
        refused = await api.key.post(f"/v1/agents/{agent['id']}/versions", json={**version, "mcp": grants})
        assert refused.status_code == 400, refused.text
        message = refused.json()["error"]["message"]
        assert message.startswith("mcp: "), message
        assert "at most 32" in message, message
        assert (await api.key.get(f"/v1/agents/{agent['id']}/versions")).json()["items"] == []
        accepted = await api.key.post(f"/v1/agents/{agent['id']}/versions", json={**version, "mcp": grants[:32]})
        assert accepted.status_code == 201, accepted.text


@pytest.mark.parametrize("name", ["mcp_calls_per_grant", "mcp_calls_per_worker"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_the_bounds_on_mcp_calls_are_refused_when_they_bound_nothing(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"SWITCHBOARD_{name.upper()}", value)
    with pytest.raises(ValidationError, match=name):
        WorkerSettings()


async def test_a_quiet_call_within_its_timeout_is_not_cut_at_the_connect_timeout(
    settings: Settings, redis_url: str, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The connect timeout (10 s) was the HTTP client's read timeout too: a call quiet that long died,
    # whatever its timeout_s. Here it is 1 s and the call takes 2.5 s of its 10.
    monkeypatch.setattr(hub, "CONNECT_TIMEOUT_S", 1.0)
    async with against(Hostile(call="answer", call_s=2.5), settings, redis_url, api_key) as (api, url, _):
        session = await api.session(mcp=[grant(url, timeout_s=10)])
        events = await answer(api, session, "/call mcp__h__wait")
    (result,) = of_type(events, "tool_result")
    assert (result["is_error"], texts(result)) == (False, ["done"])


async def test_keep_alives_do_not_stretch_a_call_and_its_request_ends_at_its_timeout(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    server = Hostile(call="keepalive", keepalive_s=0.2)
    async with against(server, settings, redis_url, api_key) as (api, url, seen):
        session = await api.session(mcp=[grant(url, timeout_s=1)])
        events = await answer(api, session, "/call mcp__h__wait")
        ended = asyncio.get_running_loop().time()
        (result,) = of_type(events, "tool_result")
        assert result["is_error"] is True
        assert "did not finish within 1 s" in texts(result)[0]
        # The request's stream is closed at the server too, not left open on its keep-alives.
        await until(lambda: len(seen.closed) == 1, timeout=5)
        assert seen.closed[0] - ended < 3


async def test_mcp_calls_hold_no_job_slot(settings: Settings, redis_url: str, api_key: str) -> None:
    # Two job slots and four calls that never answer: before, two of them held both slots until their
    # timeout, the other two waited for a slot, and so did every other session's step.
    silent = Hostile(call="answer", call_s=0)
    async with against(silent, settings, redis_url, api_key, worker_max_jobs=2) as (api, url, seen):
        hanging = await api.session(mcp=[grant(url, timeout_s=12)])
        await api.send(hanging, "\n".join(["/call mcp__h__wait"] * 4))
        await until(lambda: seen.began >= 2, timeout=5)
        other = await api.session()
        events = await answer(api, other, "hello", timeout=5)
        assert of_type(events, "run_completed")
        assert seen.began == 4
        ended = await api.wait_for(hanging, run_over, timeout=20)
    assert [r["is_error"] for r in of_type(ended, "tool_result")] == [True] * 4


async def test_calls_past_the_per_grant_bound_wait_for_their_turn(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    async with against(Hostile(call="answer", call_s=0.5), settings, redis_url, api_key, mcp_calls_per_grant=2) as (
        api,
        url,
        seen,
    ):
        session = await api.session(mcp=[grant(url, timeout_s=20)])
        events = await answer(api, session, "\n".join(["/call mcp__h__wait"] * 5))
    assert [texts(r) for r in of_type(events, "tool_result")] == [["done"]] * 5
    assert (seen.began, seen.most_running) == (5, 2)


async def test_a_call_that_gets_no_turn_within_its_timeout_says_why(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    async with against(Hostile(call="answer", call_s=0), settings, redis_url, api_key, mcp_calls_per_grant=1) as (
        api,
        url,
        seen,
    ):
        holding = await api.session(mcp=[grant(url, timeout_s=3)])
        await api.send(holding, "/call mcp__h__wait")
        await until(lambda: seen.began == 1)
        waiting = await api.session(mcp=[grant(url, timeout_s=1)])
        events = await answer(api, waiting, "/call mcp__h__wait")
        held = await api.wait_for(holding, run_over, timeout=10)
    (result,) = of_type(events, "tool_result")
    assert "did not start within 1 s" in texts(result)[0]
    assert "SWITCHBOARD_MCP_CALLS_PER_GRANT" in texts(result)[0]
    assert "did not finish within 3 s" in texts(of_type(held, "tool_result")[0])[0]
    assert seen.began == 1


async def test_calls_past_the_per_worker_bound_are_refused_saying_so(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    async with against(Hostile(call="answer", call_s=0), settings, redis_url, api_key, mcp_calls_per_worker=2) as (
        api,
        url,
        seen,
    ):
        session = await api.session(mcp=[grant(url, timeout_s=2)])
        events = await answer(api, session, "\n".join(["/call mcp__h__wait"] * 3))
    said = [texts(r)[0] for r in of_type(events, "tool_result")]
    assert sum("SWITCHBOARD_MCP_CALLS_PER_WORKER=2" in text for text in said) == 1, said
    assert seen.began == 2


async def test_a_tool_list_is_read_only_up_to_its_bound(settings: Settings, redis_url: str, api_key: str) -> None:
    # A list that never ends: before, the worker read 16 MiB of it (the bound of any answer) and parsed
    # what it read; now a page is refused once past 1 MiB, as it is read.
    async with against(Hostile(endless_list=True), settings, redis_url, api_key) as (api, url, seen):
        session = await api.session(mcp=[grant(url)])
        events = await answer(api, session, "/call mcp__h__wait")
        sent = seen.list_bytes
    (result,) = of_type(events, "tool_result")
    assert "no tool named mcp__h__wait" in texts(result)[0]
    # What the server wrote: the worker's bound plus what the sockets between them hold.
    assert MAX_LISTING_BYTES < sent < 12 * 1024 * 1024, sent


async def test_a_list_of_many_tools_keeps_the_first_256(settings: Settings, redis_url: str, api_key: str) -> None:
    async with against(Hostile(tools=1000, call_s=0.1), settings, redis_url, api_key) as (api, url, _):
        session = await api.session(mcp=[grant(url)])
        events = await answer(api, session, "/call mcp__h__t000254\n/call mcp__h__t000255")
    kept, cut = in_call_order(events)
    assert texts(kept) == ["done"]
    assert "no tool named mcp__h__t000255" in texts(cut)[0]


class _Progress:
    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        return None


def _dropped(metrics: WorkerMetrics) -> float:
    return metrics.registry.get_sample_value("switchboard_mcp_notifications_dropped_total") or 0.0


async def test_a_notification_flood_is_read_at_a_bounded_pace_dropped_counted_and_not_read_when_unused() -> None:
    # The GET stream floods notifications/message for as long as it is read; a call of 2 s keeps the
    # grant in use. Before, every notification was parsed and dispatched, at a whole core.
    addresses = ProviderAddresses(allow_private=True, timeout_s=5)
    metrics = WorkerMetrics()
    mcp = McpHub(addresses, metrics)
    async with hostile(Hostile(flood=True, call_s=2.0)) as (url, seen):
        the_grant = McpGrant(name="h", url=url, default_policy="allow", timeout_s=10)
        try:
            loop = asyncio.get_running_loop()
            began = loop.time()
            listed = await mcp.tools((the_grant,))
            assert [tool.name for tool in listed["h"]] == ["wait"]
            called = await mcp.call(the_grant, "wait", {}, _Progress())
            in_use_s = loop.time() - began + flow.LINGER_S
            assert isinstance(called, Mapped), called
            assert (called.is_error, called.text()) == (False, "done")
            dropped = _dropped(metrics)
            # Read at the connection's pace (a chunk may hold a few hundred events past it); of those, all
            # but a burst and the notifications' own pace were dropped and counted.
            read_at_most = flow.EVENT_BURST + flow.EVENTS_PER_S * in_use_s + 1000
            passed_at_least = guard.NOTIFICATION_BURST + guard.NOTIFICATIONS_PER_S * in_use_s
            assert 0 < dropped <= read_at_most
            assert seen.notified > read_at_most + passed_at_least
            # Unused (its linger past), the grant's stream is not read at all.
            await asyncio.sleep(flow.LINGER_S + 0.5)
            settled = _dropped(metrics)
            await asyncio.sleep(1.5)
            assert _dropped(metrics) == settled
        finally:
            await mcp.close()
