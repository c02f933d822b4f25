"""Settled calls are forgotten SWITCHBOARD_SETTLED_CALL_RETENTION_S after they settled (their records and
the call stream entries of calls never acked; an acked call's entry goes at its ack), by the timekeeper;
the event log keeps every call's events, calls still owed keep their records, and sessions older than the
timers get them once."""

from __future__ import annotations

import asyncio

from switchboard.settings import Settings
from tests.api_client import Api, of_type, running_api

KEEP_S = 1.0


async def test_settled_calls_are_forgotten_and_owed_ones_kept(settings: Settings, redis_url: str, api_key: str) -> None:
    # The owed call is acked and stays owed (result deadline 30 s); entries older than two ack deadlines
    # (0.5 s each) are no use to a pool.
    update: dict[str, object] = {"settled_call_retention_s": KEEP_S, "ack_timeout_s": 0.5, "result_timeout_s": 30}
    async with running_api(settings, redis_url, api_key, update) as api:
        session = await api.session()
        s = api.stack.broker.core.keys.session(session.id)
        # The node holding the session's keys (the whole Redis, on one).
        redis = api.stack.broker.core.client_for(s.calls)
        web = await api.register(session, ttl=None)
        await api.send(session, "\n".join(['/call client__web__highlight_row {"row_id": "1"}'] * 3))
        events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 3)
        answered, *_, owed = [e["call_id"] for e in of_type(events, "client_tool_dispatched")]
        for call_id in (answered, _[0]):
            assert (await api.call(session, web["id"], call_id, "result", text="done")).status_code == 204
        assert (await api.call(session, web["id"], owed, "ack")).status_code == 200
        assert await redis.hlen(s.calls) == 3
        # Each call was acked (an answer to a dispatched call acks it first): its entry is no use to a
        # pool any more, and went then; the records wait for the trim.
        assert await redis.xlen(s.client_calls(web["id"])) == 0

        loop = asyncio.get_running_loop()
        until = loop.time() + 10
        while await redis.hlen(s.calls) > 1:
            assert loop.time() < until, await redis.hkeys(s.calls)
            await asyncio.sleep(0.1)
        # The owed call keeps its record and can still be answered; a forgotten one is not found.
        assert await redis.hkeys(s.calls) == [owed.encode()]
        late = await api.call(session, web["id"], answered, "result", text="again")
        assert late.status_code == 404
        assert await redis.xlen(s.client_calls(web["id"])) == 0
        answer = await api.call(session, web["id"], owed, "result", text="done late")
        assert answer.status_code == 204, answer.text
        # Readers page every call's events as before.
        events = await api.events(session)
        assert len(of_type(events, "tool_result")) == 3
        assert {e["call_id"] for e in of_type(events, "tool_result")} >= {answered, owed}
        # The trim timer moved on and keeps coming: the last answer's record goes the same way.
        until = loop.time() + 10
        while await redis.hlen(s.calls):
            assert loop.time() < until
            await asyncio.sleep(0.1)
        assert await redis.zscore(s.partition.purges, f"c|{session.id}") is not None


async def test_zero_keeps_settled_calls(settings: Settings, redis_url: str, api_key: str) -> None:
    async with running_api(settings, redis_url, api_key, {"settled_call_retention_s": 0}) as api:
        session = await api.session()
        s = api.stack.broker.core.keys.session(session.id)
        assert (
            await api.stack.broker.core.client_for(s.partition.purges).zscore(s.partition.purges, f"c|{session.id}")
            is None
        )


async def test_sessions_older_than_the_timers_get_them_once(api: Api) -> None:
    broker = api.stack.broker
    redis, keys = broker.core.redis, broker.core.keys
    sessions = [await api.session() for _ in range(3)]
    for session in sessions:
        # As a session created before this release: no timers.
        await redis.zrem(keys.session(session.id).partition.purges, f"r|{session.id}", f"c|{session.id}")
    await redis.unlink(keys.timers_armed)
    assert await broker.retention.arm_every_session(batch=2) >= 3
    for session in sessions:
        purges = keys.session(session.id).partition.purges
        node = broker.core.client_for(purges)
        assert await node.zscore(purges, f"r|{session.id}") is not None
        assert await node.zscore(purges, f"c|{session.id}") is not None
    assert await broker.retention.arm_every_session() == 0
