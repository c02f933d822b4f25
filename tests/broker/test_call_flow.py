"""The call lifecycle through the scripts alone: dispatch, ack, answer, and the continuation barrier."""

from __future__ import annotations

import pytest

from broker import Broker
from broker.errors import Conflict, NotFound
from tests.helpers import HIGHLIGHT, call, commit, log_events, make_session, owed_work, start_run, types

pytestmark = pytest.mark.both_redis

WEB = "0190f2a0-0000-7000-8000-00000000000a"


async def test_dispatch_ack_answer_continues_once(broker: Broker) -> None:
    session_id = await make_session(broker)
    web = await broker.clients.register(session_id, WEB, "web", 60, [HIGHLIGHT])
    assert web.name == "web"
    run_id = await start_run(broker, session_id)
    first, second = call("client__web__highlight_row", {"row_id": "42"}), call("client__web__highlight_row")
    committed = await commit(broker, session_id, run_id, [first, second])
    assert committed.outcome == "waiting"

    acked = await broker.clients.ack(session_id, web.id, first.call_id)
    assert '"type":"client_tool_acked"' in acked
    assert await broker.clients.ack(session_id, web.id, first.call_id) == acked
    await broker.clients.answer(session_id, web.id, first.call_id, "done", is_error=False)
    assert await owed_work(broker, session_id) == []
    with pytest.raises(Conflict, match=f"call {first.call_id} already has a result"):
        await broker.clients.answer(session_id, web.id, first.call_id, "again", is_error=False)
    await broker.clients.answer(session_id, web.id, second.call_id, "ok", is_error=True)
    # The last answer owes the next step: an entry on the partition's work stream, written atomically.
    assert await owed_work(broker, session_id) == [f"s|{session_id}|{run_id}|1|0"]

    assert await types(broker, session_id) == [
        "session_created",
        "client_registered",
        "message_user",
        "run_queued",
        "run_started",
        "message_assistant",
        "tool_call",
        "client_tool_dispatched",
        "tool_call",
        "client_tool_dispatched",
        "client_tool_acked",
        "tool_result",
        "client_tool_acked",
        "tool_result",
    ]
    events = await log_events(broker, session_id)
    dispatched = events[7]
    assert dispatched == dispatched | {"client_id": web.id, "call_id": first.call_id, "tool": "highlight_row"}
    assert dispatched["arguments"] == {"row_id": "42"}
    assert events[-1]["is_error"] is True


async def test_unknown_names_get_an_error_result_at_once(broker: Broker) -> None:
    session_id = await make_session(broker)
    await broker.clients.register(session_id, WEB, "web", None, [HIGHLIGHT])
    run_id = await start_run(broker, session_id)
    calls = [call("client__nobody__x"), call("client__web__missing"), call("lookup")]
    committed = await commit(broker, session_id, run_id, calls)
    assert committed.outcome == "continue"
    results = [e for e in await log_events(broker, session_id) if e["type"] == "tool_result"]
    texts = [r["content"][0]["data"]["text"] for r in results]
    assert all(r["is_error"] for r in results)
    assert "no client named nobody" in texts[0]
    assert "does not serve a tool named missing" in texts[1]
    assert "no tool named lookup" in texts[2]


async def test_calls_are_bound_to_the_registration_not_the_name(broker: Broker) -> None:
    session_id = await make_session(broker)
    old = await broker.clients.register(session_id, "0190f2a0-0000-7000-8000-00000000000c", "web", 60, [HIGHLIGHT])
    run_id = await start_run(broker, session_id)
    pending = call("client__web__highlight_row")
    await commit(broker, session_id, run_id, [pending])
    await broker.clients.leave(session_id, old.id)
    assert await owed_work(broker, session_id) == [f"s|{session_id}|{run_id}|1|0"]
    new = await broker.clients.register(session_id, "0190f2a0-0000-7000-8000-00000000000d", "web", 60, [HIGHLIGHT])
    assert new.name == "web"
    with pytest.raises(NotFound, match=f"client {new.id} has no call {pending.call_id}"):
        await broker.clients.ack(session_id, new.id, pending.call_id)
    with pytest.raises(Conflict, match="failed: client_gone"):
        await broker.clients.ack(session_id, old.id, pending.call_id)
    tail = (await types(broker, session_id))[-4:]
    assert tail == ["client_left", "client_tool_failed", "tool_result", "client_registered"]


async def test_names_take_the_smallest_free_suffix(broker: Broker) -> None:
    session_id = await make_session(broker)
    ids = [f"0190f2a0-0000-7000-8000-0000000001{i:02d}" for i in range(5)]
    names = [(await broker.clients.register(session_id, cid, "web", None, [])).name for cid in ids[:3]]
    assert names == ["web", "web-2", "web-3"]
    await broker.clients.leave(session_id, ids[1])
    assert (await broker.clients.register(session_id, ids[3], "web", None, [])).name == "web-2"
    long = "a" * 32
    assert (await broker.clients.register(session_id, ids[4], long, None, [])).name == long
    other = "0190f2a0-0000-7000-8000-000000000200"
    assert (await broker.clients.register(session_id, other, long, None, [])).name == "a" * 30 + "-2"
