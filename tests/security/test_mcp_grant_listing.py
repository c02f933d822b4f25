"""A grant's server that lists its tools slowly (bench/hostile_servers.py): before, each page had 10 s of
its own, connecting 10 s for each of two transports, and a step waited for the listing in its job slot
behind the per-server lock, once or twice a step; fifty sessions of that agent filled every job slot for
about two minutes. A listing now has one deadline for connecting and every page, steps share the one in
flight, a stale list is used while it is read again, and a step lists at most once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from bench.hostile_servers import Hostile, HostileServer, Seen
from common.addresses import ProviderAddresses
from switchboard.settings import Settings
from tests.api_client import of_type, running_api
from tests.stack import serve_asgi
from workers.config import McpGrant
from workers.mcp import hub
from workers.mcp.hub import McpHub

pytestmark = pytest.mark.private_providers


@contextlib.asynccontextmanager
async def listed_by_a_hub(server: Hostile, path: str = "/mcp") -> AsyncIterator[tuple[McpHub, McpGrant, Seen]]:
    """The server on a free port, and a worker's hub of MCP servers with a grant of it."""
    made = HostileServer(server)
    async with serve_asgi(made.app(), timeout_graceful_shutdown=1) as url:
        mcp = McpHub(ProviderAddresses(allow_private=True, timeout_s=5))
        try:
            yield mcp, McpGrant(name="h", url=f"{url}{path}", default_policy="allow", timeout_s=10), made.seen
        finally:
            await mcp.close()


def names(listed: dict[str, list[hub.McpTool]]) -> list[str]:
    return [tool.name for tool in listed.get("h", [])]


async def test_a_listing_has_one_deadline_for_every_page_and_the_steps_needing_it_share_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pages without end, each after 0.3 s, and a deadline of 1 s: before, each page had the 1 s and ten
    # pages were read (3 s), with the twenty steps waiting on the lock all the while.
    monkeypatch.setattr(hub, "CONNECT_TIMEOUT_S", 1.0)
    async with listed_by_a_hub(Hostile(pages=0, page_s=0.3)) as (mcp, grant, seen):
        loop = asyncio.get_running_loop()
        began = loop.time()
        listed = await asyncio.gather(*(mcp.tools((grant,)) for _ in range(20)))
        took = loop.time() - began
    assert listed == [{}] * 20
    assert took < 1.6, took
    assert seen.listings == 1


async def test_connecting_twice_counts_toward_the_one_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Streamable HTTP refused after 1.2 s (the client asks twice), then HTTP+SSE answering `initialize`
    # after 0.6 s more: before, each transport had the whole deadline, and the tools were listed after
    # 1.8 s of a 1.5 s deadline.
    monkeypatch.setattr(hub, "CONNECT_TIMEOUT_S", 1.5)
    async with listed_by_a_hub(Hostile(sse=True, init_s=0.6)) as (mcp, grant, seen):
        loop = asyncio.get_running_loop()
        began = loop.time()
        listed = await mcp.tools((grant,))
        took = loop.time() - began
    assert (listed, seen.listings) == ({}, 0)
    assert took < 1.75, took


async def test_a_stale_list_is_used_while_it_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    async with listed_by_a_hub(Hostile(page_s=0.5)) as (mcp, grant, seen):
        assert names(await mcp.tools((grant,))) == ["wait"]
        # Every list stale from now on: a step uses the one it has at once, and it is read again beside.
        monkeypatch.setattr(hub, "LIST_TTL_S", 0.0)
        loop = asyncio.get_running_loop()
        began = loop.time()
        stale = await asyncio.gather(*(mcp.tools((grant,)) for _ in range(10)))
        took = loop.time() - began
        assert [names(listed) for listed in stale] == [["wait"]] * 10
        assert took < 0.3, took
        # One refresh for all of them, which ends on its own.
        loop_deadline = loop.time() + 5
        while seen.pages < 2 and loop.time() < loop_deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.8)
        assert seen.listings == 2


async def test_a_step_lists_its_grants_tools_once_however_often_its_catalog_is_built(
    settings: Settings, redis_url: str, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every list is stale at once, so each read of the catalog would list again. The client the step's
    # call is for registers again while the model works: the commit finds the name moved and routes the
    # calls afresh. Before, that read the grant's tools again (in the step's job slot); now the step's
    # own listing is used.
    monkeypatch.setattr(hub, "LIST_TTL_S", 0.0)
    made = HostileServer(Hostile())
    async with (
        serve_asgi(made.app(), timeout_graceful_shutdown=1) as url,
        running_api(settings, redis_url, api_key, {}) as api,
    ):
        grant = {"name": "h", "url": f"{url}/mcp", "default_policy": "allow"}
        session = await api.session(mcp=[grant])
        first = await api.register(session)
        await api.send(session, "/sleep 1.5\n/call client__web__highlight_row {}")
        await api.wait_for(session, lambda events: bool(of_type(events, "run_started")), timeout=10)
        await asyncio.sleep(0.5)
        async with api.as_session(session) as client:
            left = await client.delete(f"/v1/sessions/{session.id}/clients/{first['id']}")
            assert left.status_code == 204, left.text
        await api.register(session)
        events = await api.wait_for(session, lambda events: bool(of_type(events, "client_tool_dispatched")), timeout=15)
    assert of_type(events, "client_tool_dispatched")
    assert made.seen.listings == 1
