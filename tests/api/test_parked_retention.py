"""Retention and parked runs: a session whose run waits (an open approval, a call not yet settled) is not
purged however long it waits; its retention clock starts when the wait ends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from switchboard.settings import Settings
from tests.api_client import Api, Session, of_type, run_over, running_api

pytestmark = pytest.mark.both_redis

RETENTION_S = 1.0
APPROVAL: dict[str, Any] = {"server_tools": ["calculate"], "server_tool_policies": {"calculate": "require_approval"}}


async def alive(api: Api, session: Session) -> bool:
    status = (await api.key.get(f"/v1/sessions/{session.id}")).status_code
    assert status in (200, 404)
    return status == 200


async def until_purged(api: Api, session: Session, within_s: float) -> float:
    """How long until the session is gone (fails past `within_s`)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while await alive(api, session):
        assert loop.time() - started < within_s, "the session was not purged"
        await asyncio.sleep(0.1)
    return loop.time() - started


async def parked(api: Api) -> tuple[Session, str]:
    session = await api.session(**APPROVAL)
    await api.send(session, '/call calculate {"expression": "6*7"}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    return session, str(of_type(events, "approval_requested")[0]["call_id"])


async def test_a_parked_run_keeps_its_session_and_the_clock_starts_when_it_ends(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    update: dict[str, object] = {"session_retention_s": RETENTION_S}
    async with running_api(settings, redis_url, api_key, update) as api:
        idle = await api.session(**APPROVAL)
        waiting, call_id = await parked(api)
        await until_purged(api, idle, 10)
        # Several retention periods pass (each a check of the parked session's timer): it stays.
        await asyncio.sleep(RETENTION_S * 3)
        assert await alive(api, waiting)
        async with api.as_session(waiting) as client:
            decided = await client.post(f"/v1/sessions/{waiting.id}/approvals/{call_id}", json={"decision": "deny"})
        assert decided.status_code == 200, decided.text
        await api.wait_for(waiting, run_over)
        # Kept for the retention counted from the run's end, then purged.
        took = await until_purged(api, waiting, 10)
        assert took >= RETENTION_S * 0.8


async def test_a_call_not_yet_settled_keeps_a_session_with_no_run(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    """A call no run waits on (one an MCP client made, or one waiting for its client) still keeps its
    session: the owed hash alone says it is parked."""
    update: dict[str, object] = {"session_retention_s": RETENTION_S}
    async with running_api(settings, redis_url, api_key, update) as api:
        session = await api.session()
        core = api.stack.broker.core
        owed = core.keys.session(session.id).owed
        await core.client_for(owed).hset(owed, "call_mcp_x", "client")
        await asyncio.sleep(RETENTION_S * 3)
        assert await alive(api, session)
        await core.client_for(owed).hdel(owed, "call_mcp_x")
        await until_purged(api, session, 10)
