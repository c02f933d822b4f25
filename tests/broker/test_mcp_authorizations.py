"""Pending MCP sign-ins by state: bound to their session, single use, running out with their wait, and a
stranger's, a replayed and an expired state each refused saying which."""

from __future__ import annotations

import asyncio
import hashlib
import uuid

import pytest

from broker.broker import Broker
from broker.errors import InvalidRequest
from switchboard.settings import Settings

pytestmark = pytest.mark.both_redis


async def begin(broker: Broker[Settings], session_id: str, wait_s: int = 60) -> tuple[str, int]:
    return await broker.mcp_authorizations.begin(
        authorization_id="auth-1",
        session_id=session_id,
        grant="linear",
        server_url="https://mcp.example.com/mcp",
        flow="sealed-flow",
        wait_s=wait_s,
    )


async def test_a_state_is_taken_once_with_its_session_and_not_stored_itself(broker: Broker[Settings]) -> None:
    session_id = str(uuid.uuid4())
    state, expires_at = await begin(broker, session_id)
    assert len(state) >= 43
    key = broker.core.keys.mcp_authorization(hashlib.sha256(state.encode()).hexdigest())
    stored = await broker.core.redis.hgetall(key)
    assert state.encode() not in b"".join([*stored, *stored.values()])
    taken = await broker.mcp_authorizations.take(state)
    assert (taken.session_id, taken.authorization_id, taken.grant, taken.flow) == (
        session_id,
        "auth-1",
        "linear",
        "sealed-flow",
    )
    assert taken.expires_at_ms == expires_at
    with pytest.raises(InvalidRequest, match="used already"):
        await broker.mcp_authorizations.take(state)
    assert b"flow" not in await broker.core.redis.hgetall(key)


async def test_two_sessions_states_are_apart(broker: Broker[Settings]) -> None:
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    state_a, _ = await begin(broker, mine)
    state_b, _ = await begin(broker, theirs)
    assert state_a != state_b
    assert (await broker.mcp_authorizations.take(state_b)).session_id == theirs
    assert (await broker.mcp_authorizations.take(state_a)).session_id == mine


@pytest.mark.parametrize("state", ["", "x", "not-a-state-at-all" * 10, "\u00e9\u0000"])
async def test_a_state_never_given_is_refused(broker: Broker[Settings], state: str) -> None:
    with pytest.raises(InvalidRequest, match="not one Switchboard made"):
        await broker.mcp_authorizations.take(state)


async def test_a_state_past_its_wait_is_refused_as_run_out_then_as_used(broker: Broker[Settings]) -> None:
    state, _ = await begin(broker, str(uuid.uuid4()), wait_s=1)
    await asyncio.sleep(1.1)
    with pytest.raises(InvalidRequest, match="ran out"):
        await broker.mcp_authorizations.take(state)
    with pytest.raises(InvalidRequest, match="used already"):
        await broker.mcp_authorizations.take(state)
