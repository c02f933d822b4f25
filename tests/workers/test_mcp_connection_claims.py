"""A connection's refresh claimed by one worker at a time, settled only by its claimant; a refused token
marked only while it is still the one kept; a session's challenges kept for its next sign-in with their
step-ups counted. On both kinds of Redis (each script touches one key)."""

from __future__ import annotations

import asyncio
import secrets
import uuid

import pytest
from pydantic import SecretStr

from broker.broker import Broker
from broker.services.mcp_challenges import MAX_CHALLENGE_CHARS, Challenge
from broker.services.mcp_connections import McpConnection, TokenEndpoint
from broker.services.token_cipher import TokenCipher
from switchboard.settings import Settings

pytestmark = pytest.mark.both_redis

SERVER = "https://mcp.example.com/mcp"
CIPHER = TokenCipher(SecretStr(secrets.token_urlsafe(32)))


TOKEN_URL = "https://auth.example.com/token"


async def kept(
    broker: Broker[Settings], session_id: str, expires_at_ms: int | None = 1_000, tokens: bytes | None = None
) -> McpConnection:
    """A connection of `session_id`'s, kept (or replaced) as the callback keeps one: refreshable unless
    `tokens` are given."""
    endpoint = TokenEndpoint(TOKEN_URL, "c-1", "s-1", "client_secret_basic", SERVER, "read")
    return await broker.mcp_connections.keep(
        CIPHER,
        subject=None,
        session_id=session_id,
        grant="kit",
        server_url=SERVER,
        scopes=["read"],
        expires_at_ms=expires_at_ms,
        tokens=tokens or b'{"access_token": "at-1", "refresh_token": "rt-1", "token_type": "Bearer"}',
        endpoint=endpoint if tokens is None else None,
    )


async def test_one_claim_at_a_time_and_only_its_claimant_settles(broker: Broker[Settings]) -> None:
    connections = broker.mcp_connections
    session_id = str(uuid.uuid4())
    record = await kept(broker, session_id)
    assert record.refreshable
    endpoint = await connections.endpoint(CIPHER, record.id)
    assert endpoint is not None
    assert (endpoint.url, endpoint.client_secret, endpoint.resource) == (TOKEN_URL, "s-1", SERVER)
    assert await connections.claim_refresh(record.id, "a", 10_000) == "claimed"
    assert await connections.claim_refresh(record.id, "b", 10_000) == "busy"
    assert not await connections.settle_refresh(CIPHER, record, "b", "keep", tokens=b"{}", expires_at_ms=5)
    fresh = b'{"access_token": "at-2", "token_type": "Bearer"}'
    assert await connections.settle_refresh(CIPHER, record, "a", "keep", tokens=fresh, expires_at_ms=9_000)
    assert await connections.tokens(CIPHER, record.owner, SERVER) == fresh
    assert (await connections.get(record.id)).expires_at_ms == 9_000
    # Settled: the claim is free again, and a settled claim settles nothing more.
    assert not await connections.settle_refresh(CIPHER, record, "a", "forget")
    assert await connections.claim_refresh(record.id, "c", 10_000) == "claimed"
    assert await connections.settle_refresh(CIPHER, record, "c", "forget")
    assert await connections.get_for(record.owner, SERVER) is None
    assert await connections.claim_refresh(record.id, "d", 10_000) == "gone"


async def test_a_claim_runs_out_and_a_new_sign_in_takes_it_away(broker: Broker[Settings]) -> None:
    connections = broker.mcp_connections
    session_id = str(uuid.uuid4())
    record = await kept(broker, session_id)
    assert await connections.claim_refresh(record.id, "a", 1) == "claimed"
    # A claimant that died: its claim ran out (1 ms), another takes the connection.
    await asyncio.sleep(0.01)
    assert await connections.claim_refresh(record.id, "b", 10_000) == "claimed"
    new = b'{"access_token": "at-new", "token_type": "Bearer"}'
    await kept(broker, session_id, 2_000, new)
    assert not await connections.settle_refresh(CIPHER, record, "b", "keep", tokens=b"{}", expires_at_ms=5)
    assert await connections.tokens(CIPHER, record.owner, SERVER) == new
    # Kept without a way to refresh: not refreshable.
    assert not (await connections.get(record.id)).refreshable
    assert await connections.endpoint(CIPHER, record.id) is None


async def test_a_refused_token_is_marked_only_while_it_is_the_one_kept(broker: Broker[Settings]) -> None:
    connections = broker.mcp_connections
    session_id = str(uuid.uuid4())
    record = await kept(broker, session_id, expires_at_ms=1_000)
    assert await connections.refused(record)
    assert (await connections.get(record.id)).expires_at_ms == 0
    # Read before another token took its place (its expiry differs): left alone.
    stale = await kept(broker, session_id, expires_at_ms=7_000)
    assert not await connections.refused(record)
    assert (await connections.get(stale.id)).expires_at_ms == 7_000


async def test_a_sessions_challenges_are_kept_and_its_step_ups_bounded(broker: Broker[Settings]) -> None:
    challenges = broker.mcp_challenges
    session_id = str(uuid.uuid4())
    assert await challenges.latest(session_id, "kit") is None
    first = Challenge('Bearer resource_metadata="https://mcp.example.com/.well-known/x"', None)
    assert await challenges.note(session_id, "kit", first, step_up=False, limit=2, ttl_ms=60_000)
    assert await challenges.latest(session_id, "kit") == first
    assert await challenges.latest(str(uuid.uuid4()), "kit") is None
    assert await challenges.latest(session_id, "other") is None
    more = Challenge('Bearer error="insufficient_scope", scope="admin"', "read")
    assert await challenges.note(session_id, "kit", more, step_up=True, limit=2, ttl_ms=60_000)
    assert await challenges.note(session_id, "kit", more, step_up=True, limit=2, ttl_ms=60_000)
    assert not await challenges.note(session_id, "kit", more, step_up=True, limit=2, ttl_ms=60_000)
    # Each step-up waits for a sign-in to be begun for it.
    assert await challenges.latest(session_id, "kit") == Challenge(more.header, "read", pending=True)
    await challenges.begun(session_id, "kit")
    assert await challenges.latest(session_id, "kit") == more
    await challenges.begun(str(uuid.uuid4()), "kit")  # none noted: nothing written
    # A refused token's challenge is still kept past the bound (it asks for no more scope).
    assert await challenges.note(session_id, "kit", first, step_up=False, limit=2, ttl_ms=60_000)
    key = broker.core.keys.mcp_challenge(session_id, "kit")
    ttl = await broker.core.client_for(key).pttl(key)
    assert 0 < ttl <= 60_000


async def test_a_challenge_past_its_bound_is_refused(broker: Broker[Settings]) -> None:
    with pytest.raises(ValueError, match=str(MAX_CHALLENGE_CHARS)):
        await broker.mcp_challenges.note(
            str(uuid.uuid4()), "kit", Challenge("B" * (MAX_CHALLENGE_CHARS + 1), None), step_up=False, limit=2, ttl_ms=1
        )
