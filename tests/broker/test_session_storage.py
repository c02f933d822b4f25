"""A session's storage through the scripts alone: what each write counts and each removal gives back, and
every write refused at SWITCHBOARD_MAX_SESSION_BYTES with its name, leaving nothing behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from broker import Broker
from broker.errors import Conflict, NotFound, Unauthorized
from broker.services.clients import LARGE_WRITE_BYTES, Caller, Receipt
from broker.services.retention import Retention
from broker.transport import aio
from common.events.build import message_assistant, text_block
from switchboard.settings import Settings
from tests.helpers import (
    HIGHLIGHT,
    SCRIPTED_CONFIG,
    call,
    commit,
    log_events,
    make_session,
    owed_work,
    start_run,
    types,
)
from tests.stack import opened_broker

CAP = 200_000
SETTING = "SWITCHBOARD_MAX_SESSION_BYTES"
WEB = "0190f2a0-0000-7000-8000-00000000000a"
FILLER = "0190f2a0-0000-7000-8000-00000000000f"
URL = "https://example.com/confirm"


@pytest.fixture
async def capped(settings: Settings, redis_url: str) -> AsyncIterator[Broker]:
    update: dict[str, Any] = {"max_session_bytes": CAP, "settled_call_retention_s": 0.05}
    async with opened_broker(settings.model_copy(update=update), redis_url) as broker:
        yield broker


def tools(size: int, name: str = "big") -> list[dict[str, Any]]:
    return [{"name": name, "description": "", "parameters": {"type": "object", "description": "x" * size}}]


async def counted(broker: Broker, session_id: str) -> int:
    return int(await broker.core.redis.hget(broker.core.keys.session(session_id).meta, "bytes") or 0)


def node(broker: Broker, session_id: str) -> Redis:
    """The client of the node holding the session's keys (the whole Redis, on one)."""
    return broker.core.client_for(broker.core.keys.session(session_id).meta)


async def log_cost(broker: Broker, session_id: str) -> int:
    """What the session's log counts: each event's length and the per-entry overhead (64)."""
    rows = await broker.log.after(session_id, 0, 100_000)
    return sum(len(data) + 64 for _, data in rows)


async def snapshot(redis: Redis, broker: Broker, session_id: str) -> dict[str, Any]:
    """What a refused write must leave as it was."""
    s = broker.core.keys.session(session_id)
    return {
        "seq": await redis.hget(s.meta, "seq"),
        "calls": await redis.hgetall(s.calls),
        "owed": await redis.hgetall(s.owed),
        "queue": await redis.lrange(s.queue, 0, -1),
        "inbox": await redis.lrange(s.inbox, 0, -1),
        "names": await redis.hgetall(s.names),
        "clients": await redis.smembers(s.clients),
        "bytes": await redis.hget(s.meta, "bytes"),
    }


async def fill(broker: Broker, session_id: str, room: int) -> None:
    """Register clients whose tools leave about `room` bytes under the cap: a first one to learn what a
    registration counts besides its tools (they are stored twice: registration and event), a second to
    come within a few bytes."""
    pad = (CAP - await counted(broker, session_id)) // 4
    before = await counted(broker, session_id)
    await broker.clients.register(session_id, FILLER, "filler", None, tools(pad))
    overhead = await counted(broker, session_id) - before - 2 * pad
    rest = (CAP - await counted(broker, session_id) - room - overhead) // 2
    await broker.clients.register(session_id, FILLER[:-1] + "e", "filler", None, tools(rest))
    left = CAP - await counted(broker, session_id)
    assert 0 < left <= room + 16, left


def refused(message: str) -> bool:
    return SETTING in message and str(CAP) in message


async def test_a_session_counts_its_log_and_inputs_and_gives_back_what_leaves(capped: Broker) -> None:
    broker = capped
    session_id = await make_session(broker, policy="queue")
    assert await counted(broker, session_id) == await log_cost(broker, session_id)
    run_id = await start_run(broker, session_id, "/sleep 1")
    s = broker.core.keys.session(session_id)
    queued_run = "0190f2a0-0000-7000-8000-0000000000a1"
    await broker.runs.submit(session_id, queued_run, "0190f2a0-0000-7000-8000-0000000000b1", "q" * 5_000, "client")
    # The waiting input counts until it starts, and is marked so a retry finds it without a walk.
    assert await counted(broker, session_id) > await log_cost(broker, session_id) + 5_000
    assert await broker.core.redis.hexists(s.meta, f"queued:{queued_run}")
    await broker.runs.finish(session_id, run_id, 0, 0, "run_cancelled")
    assert not await broker.core.redis.hexists(s.meta, f"queued:{queued_run}")
    assert await node(broker, session_id).llen(s.queue) == 0
    # Nothing waits now: the count is the log's, exactly.
    assert await counted(broker, session_id) == await log_cost(broker, session_id)


async def test_steering_input_is_given_back_when_its_run_ends(capped: Broker) -> None:
    broker = capped
    session_id = await make_session(broker)
    run_id = await start_run(broker, session_id, "/sleep 1")
    for n in range(3):
        steered = await broker.runs.submit(
            session_id,
            f"0190f2a0-0000-7000-8000-0000000000c{n}",
            f"0190f2a0-0000-7000-8000-0000000000d{n}",
            "s" * 1_000,
            "client",
        )
        assert steered.outcome == "steered"
    await broker.runs.finish(session_id, run_id, 0, 0, "run_cancelled")
    # The run's steering ids and the input it never read leave with it: the count is the log's, exactly.
    assert await counted(broker, session_id) == await log_cost(broker, session_id)


async def test_a_registration_that_leaves_keeps_only_what_a_late_request_reads(capped: Broker) -> None:
    broker = capped
    session_id = await make_session(broker)
    redis = node(broker, session_id)
    s = broker.core.keys.session(session_id)
    before = await counted(broker, session_id)
    await broker.clients.register(session_id, WEB, "web", None, tools(40_000))
    registered = await counted(broker, session_id) - before
    assert registered > 80_000
    await broker.clients.leave(session_id, WEB)
    left = await counted(broker, session_id) - before
    # What stays counted: the two events (the tools in client_registered among them) and a few fields.
    events = await log_cost(broker, session_id) - before
    assert events < left < events + 1_000
    remainder = {k.decode() for k in aio.members(await redis.hkeys(s.client(WEB)))}
    assert remainder == {"name", "state", "left_reason", "ttl_ms", "created_at", "run"}
    assert 0 < await redis.pttl(s.client(WEB)) <= broker.settings.idempotency_ttl_ms
    assert not await redis.exists(s.client_calls(WEB))
    # A late request still reads it as gone; leaving again changes nothing and succeeds.
    await broker.clients.leave(session_id, WEB)
    with pytest.raises(NotFound):
        await broker.clients.ping(session_id, WEB)
    # A retried register of the same id answers as the first did (it does not register it again).
    again = await broker.clients.register(session_id, WEB, "web", None, tools(10))
    assert again.name == "web"
    assert await redis.hget(s.client(WEB), "state") == b"left"


async def test_settled_calls_give_back_their_records_and_call_stream_entries(capped: Broker) -> None:
    broker = capped
    session_id = await make_session(broker)
    await broker.clients.register(session_id, WEB, "web", None, [HIGHLIGHT])
    run_id = await start_run(broker, session_id)
    first = call("client__web__highlight_row", {"row_id": "r" * 3_000})
    assert (await commit(broker, session_id, run_id, [first])).outcome == "waiting"
    s = broker.core.keys.session(session_id)
    raw = await broker.core.redis.hget(s.calls, first.call_id)
    assert raw is not None
    assert b'"sb":' in raw  # the call stream entry it counts (3 KB of arguments)
    await broker.clients.answer(session_id, WEB, first.call_id, "done", is_error=False)
    # The answer acked it first: no pool member is handed it any more, so its entry went then, and the
    # record no longer counts it.
    assert await node(broker, session_id).xlen(s.client_calls(WEB)) == 0
    raw = await broker.core.redis.hget(s.calls, first.call_id)
    assert raw is not None
    assert b'"sb":' not in raw
    held = await counted(broker, session_id)
    await asyncio.sleep(0.1)
    assert await Retention(broker.core).trim(session_id) == "trimmed"
    assert await node(broker, session_id).hlen(s.calls) == 0
    # The record is given back, and with the entry before it, to the byte: what is left is the log and
    # the registration (its release amount `bl`, its key, fields and id in `clients`).
    assert held - await counted(broker, session_id) >= len(raw)
    bl = int(await broker.core.redis.hget(s.client(WEB), "bl") or 0)
    registration = bl + 128 + 192 + len(WEB) + 64
    assert await counted(broker, session_id) == await log_cost(broker, session_id) + registration


async def test_every_write_past_the_cap_is_refused_naming_the_setting_and_leaves_nothing(capped: Broker) -> None:
    broker = capped
    session_id = await make_session(broker)
    redis = node(broker, session_id)
    s = broker.core.keys.session(session_id)
    await broker.clients.register(session_id, WEB, "web", None, [HIGHLIGHT])
    run_id = await start_run(broker, session_id)
    first, second = call("client__web__highlight_row"), call("client__web__highlight_row")
    assert (await commit(broker, session_id, run_id, [first, second])).outcome == "waiting"
    await broker.clients.ack(session_id, WEB, second.call_id)
    await fill(broker, session_id, room=3_000)
    before = await snapshot(redis, broker, session_id)

    with pytest.raises(Conflict) as error:
        await broker.clients.register(session_id, "0190f2a0-0000-7000-8000-00000000000b", "more", None, tools(4_000))
    assert refused(error.value.message)
    assert not await redis.exists(s.client("0190f2a0-0000-7000-8000-00000000000b"))
    with pytest.raises(Conflict) as error:
        await broker.clients.update_tools(session_id, WEB, tools(4_000, "bigger"))
    assert refused(error.value.message)
    with pytest.raises(Conflict) as error:
        await broker.runs.submit(session_id, "0190f2a0-0000-7000-8000-0000000000a2", "x", "t" * 4_000, "client")
    assert refused(error.value.message)

    receipt = Receipt(s.idempotency("k1"), "f" * 64, 60_000)
    for write in (
        broker.clients.answer(session_id, WEB, first.call_id, "a" * 4_000, is_error=False),
        broker.clients.answer(session_id, WEB, second.call_id, "a" * 4_000, is_error=False, receipt=receipt),
        broker.clients.progress(session_id, WEB, second.call_id, "p" * 4_000, None, receipt=receipt),
    ):
        with pytest.raises(Conflict) as error:
            await write
        assert refused(error.value.message)
    # A refusal at the cap keeps no receipt, and the calls are still owed.
    assert not await redis.exists(receipt.key)
    assert await snapshot(redis, broker, session_id) == before

    with pytest.raises(Conflict) as error:
        await broker.idempotency.begin("k2", "f" * 64, {"x": "y" * 4_000}, 60_000, session_id)
    assert refused(error.value.message)
    assert not await redis.exists(s.idempotency("k2"))
    assert await snapshot(redis, broker, session_id) == before


async def test_an_ack_is_refused_at_the_cap_and_a_ping_is_not(capped: Broker) -> None:
    broker = capped
    session_id = await make_session(broker)
    redis = node(broker, session_id)
    s = broker.core.keys.session(session_id)
    await broker.clients.register(session_id, WEB, "web", 60, [HIGHLIGHT])
    run_id = await start_run(broker, session_id)
    first = call("client__web__highlight_row")
    assert (await commit(broker, session_id, run_id, [first])).outcome == "waiting"
    await fill(broker, session_id, room=100)
    before = await snapshot(redis, broker, session_id)
    with pytest.raises(Conflict) as error:
        await broker.clients.ack(session_id, WEB, first.call_id)
    assert refused(error.value.message)
    assert await snapshot(redis, broker, session_id) == before
    # A ping stores nothing that lasts (its receipt, with a key, lives 5 minutes and is not counted): it
    # keeps the registration alive whatever the session holds.
    assert "expires_at" in await broker.clients.ping(session_id, WEB)
    keyed = Receipt(s.idempotency("p1"), "f" * 64, 300_000)
    assert "expires_at" in await broker.clients.ping(session_id, WEB, receipt=keyed)
    assert await snapshot(redis, broker, session_id) == before


async def test_a_step_whose_output_would_pass_the_cap_ends_the_run_and_writes_none_of_it(capped: Broker) -> None:
    broker = capped
    session_id = await make_session(broker)
    run_id = await start_run(broker, session_id)
    await fill(broker, session_id, room=3_000)
    message = message_assistant([text_block("m" * 5_000)], "scripted")
    committed = await broker.runs.commit(session_id, run_id, 0, 0, message, [], "")
    assert committed.outcome == "failed"
    events = await log_events(broker, session_id)
    assert "message_assistant" not in await types(broker, session_id)
    (failed,) = [e for e in events if e["type"] == "run_failed"]
    assert refused(failed["error"])
    # The session stays readable and deletable.
    assert (await broker.sessions.get(session_id)).id == session_id
    await broker.sessions.delete(session_id)


async def test_no_cap_means_no_refusal(settings: Settings, redis_url: str) -> None:
    async with opened_broker(settings.model_copy(update={"max_session_bytes": 0}), redis_url) as broker:
        session_id = await make_session(broker)
        await broker.clients.register(session_id, WEB, "web", None, tools(300_000))
        assert await counted(broker, session_id) > CAP


async def test_a_large_result_is_checked_before_it_is_sent_and_only_for_its_own_session(capped: Broker) -> None:
    broker = capped
    session_id = await make_session(broker)
    redis = node(broker, session_id)
    await broker.clients.register(session_id, WEB, "web", None, [HIGHLIGHT])
    run_id = await start_run(broker, session_id)
    first = call("client__web__highlight_row")
    assert (await commit(broker, session_id, run_id, [first])).outcome == "waiting"
    before = await snapshot(redis, broker, session_id)
    large = "a" * (LARGE_WRITE_BYTES + 1)
    # A token that is not the session's learns nothing of its storage: 401, as from the result's script.
    with pytest.raises(Unauthorized, match="unknown or expired"):
        await broker.clients.answer(session_id, WEB, first.call_id, large, is_error=False, caller=Caller("0" * 64))
    with pytest.raises(Conflict) as error:
        await broker.clients.answer(session_id, WEB, first.call_id, large, is_error=False)
    assert refused(error.value.message)
    assert await snapshot(redis, broker, session_id) == before


async def test_a_server_tool_result_past_the_cap_becomes_an_error_result_and_the_run_goes_on(capped: Broker) -> None:
    broker = capped
    config = {**SCRIPTED_CONFIG, "server_tools": ["calculate"]}
    session_id = await make_session(broker, config)
    run_id = await start_run(broker, session_id)
    sum_call = call("calculate", {"expression": "1+1"})
    assert (await commit(broker, session_id, run_id, [sum_call], config)).outcome == "waiting"
    assert await broker.server_calls.begin(session_id, sum_call.call_id) is not None
    await fill(broker, session_id, room=1_000)
    await broker.server_calls.result(session_id, sum_call.call_id, "r" * 5_000, is_error=False)
    (result,) = [e for e in await log_events(broker, session_id) if e["type"] == "tool_result"]
    assert result["is_error"] is True
    assert refused(result["content"][0]["data"]["text"])
    # The call is settled, so the run's next step is owed: the run goes on.
    assert f"s|{session_id}|{run_id}|1|0" in await owed_work(broker, session_id)


async def asking_call(broker: Broker, session_id: str, tool: dict[str, Any], ids: str) -> str:
    """A run's call of `tool` to the web client, acked, holding the four open requests a call may hold
    (ids `ids` followed by 0 to 3); its call id."""
    await broker.clients.register(session_id, WEB, "web", None, [tool])
    run_id = await start_run(broker, session_id)
    first = call("client__web__highlight_row")
    assert (await commit(broker, session_id, run_id, [first])).outcome == "waiting"
    await broker.clients.ack(session_id, WEB, first.call_id)
    for n in range(4):
        request_id = f"{ids}{n}"
        await broker.inputs.ask(session_id, WEB, first.call_id, request_id, "ok?", schema=None, url=URL, key=None)
    return first.call_id


async def test_a_result_counts_the_input_provided_events_ending_its_open_requests(capped: Broker) -> None:
    broker = capped
    session_id = await make_session(broker)
    redis = node(broker, session_id)
    call_id = await asking_call(broker, session_id, HIGHLIGHT, "0190f2a0-0000-7000-8000-00000000010")
    # Room for the result itself, but not for it and the four events that end the open requests.
    await fill(broker, session_id, room=800)
    before = await snapshot(redis, broker, session_id)
    with pytest.raises(Conflict) as error:
        await broker.clients.answer(session_id, WEB, call_id, "done", is_error=False)
    assert refused(error.value.message)
    assert await snapshot(redis, broker, session_id) == before
    # With room again (a filler leaves), the result goes in with the four events, under the cap.
    await broker.clients.leave(session_id, FILLER[:-1] + "e")
    await broker.clients.answer(session_id, WEB, call_id, "done", is_error=False)
    ended = [e for e in await log_events(broker, session_id) if e["type"] == "input_provided"]
    assert [e["reason"] for e in ended] == ["call_settled"] * 4
    assert await counted(broker, session_id) <= CAP


async def test_dropping_a_tool_counts_the_input_provided_events_ending_its_waiting_calls_requests(
    capped: Broker,
) -> None:
    broker = capped
    session_id = await make_session(broker)
    redis = node(broker, session_id)
    await asking_call(broker, session_id, {**HIGHLIGHT, "on_leave": "wait"}, "0190f2a0-0000-7000-8000-00000000020")
    # Room for the new tool list, not for it and the four events that end the requests as the call waits.
    await fill(broker, session_id, room=800)
    before = await snapshot(redis, broker, session_id)
    with pytest.raises(Conflict) as error:
        await broker.clients.update_tools(session_id, WEB, [])
    assert refused(error.value.message)
    assert await snapshot(redis, broker, session_id) == before
    await broker.clients.leave(session_id, FILLER[:-1] + "e")
    await broker.clients.update_tools(session_id, WEB, [])
    ended = [e for e in await log_events(broker, session_id) if e["type"] == "input_provided"]
    assert [e["reason"] for e in ended] == ["call_waiting"] * 4
    assert await counted(broker, session_id) <= CAP
