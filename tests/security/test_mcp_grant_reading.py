"""What a worker reads of a grant's server (bench/hostile_servers.py), each test a reviewer's finding: a
pace whose debt had no cap and whose wait outlived its request, an HTTP+SSE session ended for the sum of its
ordinary traffic, bounds that were each per connection (so 32 grants at different URLs of one host
multiplied them), and an answer whose JSON holds millions of values (16 MB of them parse into about 1.8 GB)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from bench.hostile_servers import Hostile, HostileServer, Seen
from common.addresses import ProviderAddresses
from tests.stack import serve_asgi
from workers.config import McpGrant
from workers.mcp import budget
from workers.mcp.hub import McpHub
from workers.mcp.mapped import Mapped

pytestmark = pytest.mark.private_providers


class _Progress:
    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        return None


@contextlib.asynccontextmanager
async def served(server: Hostile) -> AsyncIterator[tuple[str, Seen, McpHub]]:
    """The server on a free port (its base URL, what it saw) and a worker's hub of MCP servers."""
    made = HostileServer(server)
    async with serve_asgi(made.app(), timeout_graceful_shutdown=1) as url:
        mcp = McpHub(ProviderAddresses(allow_private=True, timeout_s=5))
        try:
            yield url, made.seen, mcp
        finally:
            await mcp.close()


def grant(url: str, path: str = "/mcp", timeout_s: int = 10) -> McpGrant:
    return McpGrant(name="h", url=f"{url}{path}", default_policy="allow", timeout_s=timeout_s)


async def call(mcp: McpHub, the_grant: McpGrant) -> Mapped:
    answered = await mcp.call(the_grant, "wait", {}, _Progress())
    # These servers answer in line: never a task or a request for input.
    assert isinstance(answered, Mapped), answered
    return answered


async def test_a_pace_owed_for_a_flood_of_blank_lines_ends_with_its_request() -> None:
    # 64 KiB of blank lines on the call's event stream counted as 32,768 events: about 325 s owed, slept
    # outside the request's cancel scope, so the exchange stayed open that long after the call's 1 s.
    async with served(Hostile(call="blank_lines")) as (url, seen, mcp):
        the_grant = grant(url, timeout_s=1)
        result = await call(mcp, the_grant)
        ended = asyncio.get_running_loop().time()
        assert result.is_error
        assert "did not finish within 1 s" in result.text()
        deadline = ended + 8
        while not seen.closed and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert seen.closed, "the call's exchange was left open"


async def test_a_long_http_sse_session_is_not_ended_for_its_total_traffic() -> None:
    # 40 notifications of 500 KB (20 MB) on the session's stream while a call runs: before, the stream
    # was one answer of at most 16 MiB, so the session ended and the call with it.
    server = Hostile(sse=True, flood=True, flood_event_bytes=500_000, flood_limit=40, call_s=0.5)
    async with served(server) as (url, seen, mcp):
        the_grant = grant(url, "/mcp/sse", timeout_s=20)
        assert [tool.name for tool in (await mcp.tools((the_grant,)))["h"]] == ["wait"]
        result = await call(mcp, the_grant)
        assert (result.is_error, result.text()) == (False, "done")
        assert seen.notified == 40
        assert seen.sessions == 1


async def test_a_listing_page_past_its_bound_is_refused_over_http_sse_too() -> None:
    # 30 tools of 53 KB schemas: a page of about 1.6 MB on the session's stream. (The `mcp` client's own
    # reader of that stream refuses an event past 1 MiB as well, by default, so this held before.)
    async with served(Hostile(sse=True, tools=30, schema_chars=53_000)) as (url, seen, mcp):
        assert await mcp.tools((grant(url, "/mcp/sse"),)) == {}
        assert seen.listings == 1


async def test_an_answer_of_too_many_json_values_is_refused_as_it_is_read() -> None:
    # 3 MB of empty lists: a million values, which the client's parser would make about 330 MB of.
    server = Hostile(call="big", answer_bytes=3_000_000, answer_values=True, call_s=0.01)
    async with served(server) as (url, _, mcp):
        result = await call(mcp, grant(url))
    assert result.is_error
    assert "JSON values" in result.text(), result.text()


async def test_an_initialize_answer_is_held_to_the_bound_of_a_page() -> None:
    async with served(Hostile(instructions=3_000_000)) as (url, _, mcp):
        assert await mcp.tools((grant(url),)) == {}


async def test_the_answers_a_worker_holds_in_flight_share_one_budget_across_its_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Six grants at six URLs of one host, each call answered with 1.5 MB held open for 2 s: each
    # connection's bound alone let the worker hold all six; a worker's budget of 4 MiB holds two.
    monkeypatch.setattr(budget, "WORKER_ANSWER_BYTES", 4 * 1024 * 1024, raising=False)
    server = Hostile(call="big", answer_bytes=1_500_000, call_s=2.0)
    async with served(server) as (url, _, mcp):
        results = await asyncio.gather(*(call(mcp, grant(url, f"/mcp/{n}")) for n in range(6)))
        # Given back as each answer ended, read whole or refused.
        assert mcp.budget.held == 0
        assert mcp.budget.peak <= budget.WORKER_ANSWER_BYTES
    done = [r for r in results if not r.is_error]
    refused = [r.text() for r in results if r.is_error]
    assert 1 <= len(done) <= 2, [r.text()[:200] for r in results]
    assert all("answers in flight" in text for text in refused), refused


async def test_a_calls_exchange_is_known_for_the_calls_by_its_message_alone() -> None:
    # 2 MB of text: past the 1 MiB of an exchange of no request of ours, within a call's 16 MiB. Should the
    # `mcp` client stop carrying a request's `_meta` to the wire, this answer would be refused.
    async with served(Hostile(call="big", answer_bytes=2_000_000, call_s=0.01)) as (url, _, mcp):
        result = await call(mcp, grant(url))
    assert not result.is_error, result.text()[:300]
    assert result.text().startswith("x" * 1000)


async def test_a_listing_or_a_call_carries_nothing_of_ours_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    async with served(Hostile(call_s=0.01)) as (url, seen, mcp):
        the_grant = grant(url)
        assert (await mcp.tools((the_grant,)))["h"]
        assert (await call(mcp, the_grant)).text() == "done"
    assert len(seen.metas) == 2
    assert all(not any(key.startswith("switchboard") for key in meta) for meta in seen.metas), seen.metas
