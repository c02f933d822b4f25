"""Calls that wait for their client, through the scripts alone: the per-name index, pools, a call no run
made, and every way a waiting call settles."""

from __future__ import annotations

import pytest

from broker import Broker
from broker.errors import NotFound
from common.codec import loads
from tests.helpers import HIGHLIGHT, call, commit, log_events, make_session, start_run

pytestmark = pytest.mark.both_redis

OLD = "0190f2a0-0000-7000-8000-0000000000a1"
NEW = "0190f2a0-0000-7000-8000-0000000000a2"
WAITING = {**HIGHLIGHT, "on_leave": "wait"}


async def waiting_field(broker: Broker, session_id: str, name: str = "web") -> list[str] | None:
    raw = await broker.core.redis.hget(broker.core.keys.session(session_id).meta, f"waiting:{name}")
    return None if raw is None else list(loads(raw))


async def record(broker: Broker, session_id: str, call_id: str) -> dict[str, object]:
    raw = await broker.core.redis.hget(broker.core.keys.session(session_id).calls, call_id)
    assert raw is not None
    found: dict[str, object] = loads(raw)
    return found


async def parked(broker: Broker) -> tuple[str, str, str]:
    """A session whose `web` left holding a call of a waiting tool: the session, run and call ids."""
    session_id = await make_session(broker)
    await broker.clients.register(session_id, OLD, "web", None, [WAITING])
    run_id = await start_run(broker, session_id)
    pending = call("client__web__highlight_row", {"row_id": "3"})
    assert (await commit(broker, session_id, run_id, [pending])).outcome == "waiting"
    await broker.clients.leave(session_id, OLD)
    return session_id, run_id, pending.call_id


async def test_the_waiting_calls_of_a_name_are_indexed_and_taken_in_order(broker: Broker) -> None:
    session_id = await make_session(broker)
    await broker.clients.register(session_id, OLD, "web", None, [WAITING, {**HIGHLIGHT, "name": "plain"}])
    run_id = await start_run(broker, session_id)
    calls = [call("client__web__highlight_row"), call("client__web__plain"), call("client__web__highlight_row")]
    await commit(broker, session_id, run_id, calls)
    await broker.clients.leave(session_id, OLD)
    first, plain, second = (c.call_id for c in calls)
    assert await waiting_field(broker, session_id) == [first, second]
    assert (await record(broker, session_id, plain))["reason"] == "client_gone"
    # A registration offering other tools takes nothing and leaves the list as it was.
    await broker.clients.register(session_id, NEW, "web", None, [{**HIGHLIGHT, "name": "other"}])
    assert await waiting_field(broker, session_id) == [first, second]
    await broker.clients.update_tools(session_id, NEW, [WAITING])
    assert await waiting_field(broker, session_id) is None
    events = await log_events(broker, session_id)
    again = [e["call_id"] for e in events if e["type"] == "client_tool_dispatched" and e["client_id"] == NEW]
    assert again == [first, second]
    for call_id in again:
        assert (await record(broker, session_id, call_id))["state"] == "dispatched"


async def test_a_waiting_call_settled_otherwise_leaves_the_index(broker: Broker) -> None:
    session_id, _, call_id = await parked(broker)
    assert await waiting_field(broker, session_id) == [call_id]
    await broker.calls.cancel(session_id, call_id, "enough")
    assert await waiting_field(broker, session_id) is None
    rec = await record(broker, session_id, call_id)
    assert (rec["state"], rec["reason"]) == ("failed", "run_gone")
    failed = [e for e in await log_events(broker, session_id) if e["type"] == "client_tool_failed"]
    assert failed[-1] == failed[-1] | {"client_id": OLD, "call_id": call_id, "detail": "cancelled"}
    # Nothing waits for `web` any more: a new `web` is handed nothing.
    await broker.clients.register(session_id, NEW, "web", None, [WAITING])
    assert not [e for e in await log_events(broker, session_id) if e.get("client_id") == NEW and "call_id" in e]


async def test_a_run_that_ends_fails_its_waiting_calls_with_run_gone(broker: Broker) -> None:
    session_id, run_id, call_id = await parked(broker)
    assert await broker.runs.cancel(session_id) == run_id
    assert await waiting_field(broker, session_id) is None
    rec = await record(broker, session_id, call_id)
    assert (rec["state"], rec["reason"]) == ("failed", "run_gone")


async def test_the_wait_replaces_the_calls_deadline_and_ends_with_client_gone(broker: Broker) -> None:
    session_id, _, call_id = await parked(broker)
    keys = broker.core.keys.session(session_id)
    member = broker.core.keys.member(session_id, call_id)
    deadlines = broker.core.client_for(keys.partition.deadlines)
    due = await deadlines.zscore(keys.partition.deadlines, member)
    rec = await record(broker, session_id, call_id)
    first = rec["fd"]
    assert isinstance(first, int)
    # The deployment's result deadline (no timeout_s), from the first dispatch.
    assert due == first + broker.settings.result_timeout_ms
    # Not yet due: nothing happens.
    assert await broker.timers.expire_call(session_id, call_id) == "not_due"
    await deadlines.zadd(keys.partition.deadlines, {member: 0})
    assert await broker.timers.expire_call(session_id, call_id) == "failed"
    rec = await record(broker, session_id, call_id)
    assert (rec["state"], rec["reason"]) == ("failed", "client_gone")
    assert await waiting_field(broker, session_id) is None


async def test_a_call_no_run_made_waits_too(broker: Broker) -> None:
    session_id = await make_session(broker)
    await broker.clients.register(session_id, OLD, "web", None, [WAITING])
    sent = await broker.calls.dispatch(
        session_id, (OLD, "web"), "highlight_row", {"row_id": "1"}, policy="allow", name="x", on_leave="wait"
    )
    await broker.clients.leave(session_id, OLD)
    events = await log_events(broker, session_id)
    waiting = next(e for e in events if e["type"] == "client_tool_waiting")
    assert waiting == waiting | {"call_id": sent.call_id, "run_id": None, "client_name": "web"}
    await broker.clients.register(session_id, NEW, "web", None, [WAITING])
    again = [e for e in await log_events(broker, session_id) if e["type"] == "client_tool_dispatched"][-1]
    assert again == again | {"client_id": NEW, "call_id": sent.call_id, "from": "mcp", "arguments": {"row_id": "1"}}
    with pytest.raises(NotFound):
        await broker.clients.ack(session_id, OLD, sent.call_id)
    await broker.clients.ack(session_id, NEW, sent.call_id)


async def test_a_pool_member_holding_the_call_loses_it_and_one_member_gets_it_again(broker: Broker) -> None:
    session_id = await make_session(broker)
    await broker.clients.register(session_id, OLD, "pool", None, [WAITING])
    run_id = await start_run(broker, session_id)
    pending = call("client__pool__highlight_row")
    await commit(broker, session_id, run_id, [pending])
    pools = broker.pools
    a, b = pools.new_member(), pools.new_member()
    (handed,) = await pools.take(session_id, OLD, a, reclaim=False)
    assert loads(handed)["call_id"] == pending.call_id
    # The registration drops the tool: the call waits, and member a holds nothing any more.
    await broker.clients.update_tools(session_id, OLD, [])
    assert (await record(broker, session_id, pending.call_id))["state"] == "waiting"
    stream = broker.core.keys.session(session_id).client_calls(OLD)
    assert await broker.core.redis.xpending_range(stream, "pool", "-", "+", 10, a) == []
    # Offered again: dispatched as a new entry, handed to one member once; the old entry never again.
    await broker.clients.update_tools(session_id, OLD, [WAITING])
    (again,) = await pools.take(session_id, OLD, b, reclaim=True, prefetch=5)
    assert loads(again)["call_id"] == pending.call_id
    assert await pools.take(session_id, OLD, a, reclaim=True, prefetch=5) == []
    await broker.clients.ack(session_id, OLD, pending.call_id, member=b)
    await broker.clients.answer(session_id, OLD, pending.call_id, "done", is_error=False)
    assert (await record(broker, session_id, pending.call_id))["state"] == "answered"
