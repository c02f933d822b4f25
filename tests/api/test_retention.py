"""Sessions with no activity for SWITCHBOARD_SESSION_RETENTION_S are purged with every key they own, by
the timekeeper; a session in use never is; /metrics/cluster shows what is stored."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from switchboard.settings import Settings
from tests.api_client import Api, Session, of_type, run_over, running_api
from tests.helpers import Exposition

RETENTION_S = 1.5
IDLE = 12


async def session_keys(redis: Redis, prefix: str, session: Session) -> list[bytes]:
    """The keys a session owns (a test may scan: this is not a request path)."""
    return [key async for key in redis.scan_iter(match=f"{prefix}:*:s:{session.id}:*", count=1000)]


async def used_memory(redis: Redis) -> int:
    return int((await redis.info("memory"))["used_memory"])


async def busy_session(api: Api) -> Session:
    """A session with a run answered, a client that called back and left: events, calls, receipts."""
    session = await api.session()
    web = await api.register(session, ttl=None)
    await api.send(session, '/call client__web__highlight_row {"row_id": "1"}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call_id = of_type(events, "client_tool_dispatched")[0]["call_id"]
    assert (await api.call(session, web["id"], call_id, "result", text="done")).status_code == 204
    await api.wait_for(session, run_over)
    async with api.as_session(session) as client:
        assert (await client.delete(f"/v1/sessions/{session.id}/clients/{web['id']}")).status_code == 204
    return session


async def test_idle_sessions_are_purged_whole_and_a_session_in_use_is_kept(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    redis = Redis.from_url(redis_url)
    try:
        update: dict[str, object] = {"session_retention_s": RETENTION_S}
        async with running_api(settings, redis_url, api_key, update) as api:
            in_use = await api.session()
            await api.register(in_use, name="tab", ttl=None)  # a tab that stays, and only that
            await asyncio.sleep(0.5)
            before = await used_memory(redis)
            idle = [await busy_session(api) for _ in range(IDLE)]
            # The newest one is still there (the first may already be going: each took a while to make).
            assert await session_keys(redis, settings.key_prefix, idle[-1])
            figures = Exposition((await api.key.get("/metrics/cluster")).text)
            assert 2 <= figures("switchboard_sessions_stored") <= IDLE + 1
            assert figures("switchboard_redis_memory_bytes") > 0

            loop = asyncio.get_running_loop()
            until = loop.time() + 15
            while any([await session_keys(redis, settings.key_prefix, s) for s in idle]):
                assert loop.time() < until, "idle sessions were not purged"
                await asyncio.sleep(0.2)
            for session in idle:
                assert (await api.key.get(f"/v1/sessions/{session.id}")).status_code == 404
            assert (await api.key.get("/v1/sessions", params={"limit": 200})).json()["items"] == [
                (await api.key.get(f"/v1/sessions/{in_use.id}")).json()
            ]
            # Everything they held is gone: Redis is back to about where it was before them.
            after = await used_memory(redis)
            assert after - before < 512 * 1024, (before, after)
            figures = Exposition((await api.key.get("/metrics/cluster")).text)
            assert figures("switchboard_sessions_stored") == 1

            # In use well past the retention (several checks came and went): kept.
            await asyncio.sleep(RETENTION_S * 2)
            assert (await api.key.get(f"/v1/sessions/{in_use.id}")).status_code == 200
            assert await session_keys(redis, settings.key_prefix, in_use)
    finally:
        await redis.aclose()


async def test_zero_keeps_sessions_for_ever(settings: Settings, redis_url: str, api_key: str) -> None:
    async with running_api(settings, redis_url, api_key, {"session_retention_s": 0}) as api:
        session = await api.session()
        await asyncio.sleep(1.0)
        assert (await api.key.get(f"/v1/sessions/{session.id}")).status_code == 200
        part = api.stack.broker.core.keys.session(session.id).partition
        assert await api.stack.broker.core.client_for(part.purges).zscore(part.purges, f"r|{session.id}") is None
