"""The hot routes' Idempotency-Key receipts: the outcome kept with its body (or a refusal with its reason
and values), and read in the two forms receipts had before outcomes (kept for the receipt ttl, so an
upgrade replays what was answered before it)."""

from __future__ import annotations

import json

import pytest

from broker import Broker
from broker.errors import Conflict, NotFound
from broker.services.clients import Receipt
from tests.helpers import HIGHLIGHT, call, commit, make_session, start_run, types

WEB = "0190f2a0-0000-7000-8000-00000000000a"
OTHER = "0190f2a0-0000-7000-8000-00000000000b"


async def waiting_call(broker: Broker) -> tuple[str, str]:
    session_id = await make_session(broker)
    await broker.clients.register(session_id, WEB, "web", None, [HIGHLIGHT])
    run = await start_run(broker, session_id)
    pending = call("client__web__highlight_row")
    assert (await commit(broker, session_id, run, [pending])).outcome == "waiting"
    return session_id, pending.call_id


async def test_a_receipt_replays_its_answer_and_refuses_another_request(broker: Broker) -> None:
    session_id, call_id = await waiting_call(broker)
    receipt = Receipt(broker.core.keys.session(session_id).idempotency("k"), "f1", 60_000)
    first = await broker.clients.ack(session_id, WEB, call_id, receipt=receipt)
    assert '"type":"client_tool_acked"' in first
    assert await broker.core.redis.get(receipt.key) == f"ok f1 {first}".encode()
    assert await broker.clients.ack(session_id, WEB, call_id, receipt=receipt) == first
    other = Receipt(receipt.key, "f2", 60_000)
    with pytest.raises(Conflict, match="already used with a different request"):
        await broker.clients.ack(session_id, WEB, call_id, receipt=other)


async def test_a_refusal_is_kept_and_replayed_with_its_reason_and_values(broker: Broker) -> None:
    session_id, call_id = await waiting_call(broker)
    receipt = Receipt(broker.core.keys.session(session_id).idempotency("k"), "f1", 60_000)
    with pytest.raises(NotFound, match=f"client {OTHER} has no call {call_id}") as first:
        await broker.clients.ack(session_id, OTHER, call_id, receipt=receipt)
    kept = await broker.core.redis.get(receipt.key)
    assert kept == f'not_found f1 ["no_call","{OTHER}","{call_id}"]'.encode()
    with pytest.raises(NotFound) as again:
        await broker.clients.ack(session_id, OTHER, call_id, receipt=receipt)
    assert again.value.message == first.value.message


async def test_a_receipt_written_in_the_earlier_json_form_still_replays(broker: Broker) -> None:
    session_id, call_id = await waiting_call(broker)
    receipt = Receipt(broker.core.keys.session(session_id).idempotency("k"), "f1", 60_000)
    await broker.core.redis.set(receipt.key, json.dumps({"fp": "f1", "status": 204, "body": ""}), px=60_000)
    await broker.clients.answer(session_id, WEB, call_id, "done", is_error=False, receipt=receipt)
    # It was answered before: the replay does not record the result again.
    assert (await types(broker, session_id)).count("tool_result") == 0


async def test_a_receipt_written_in_the_earlier_status_form_still_replays(broker: Broker) -> None:
    session_id, call_id = await waiting_call(broker)
    s = broker.core.keys.session(session_id)
    acked = Receipt(s.idempotency("a"), "f1", 60_000)
    await broker.core.redis.set(acked.key, 'H200 f1 {"type":"client_tool_acked","seq":9}', px=60_000)
    assert await broker.clients.ack(session_id, WEB, call_id, receipt=acked) == '{"type":"client_tool_acked","seq":9}'
    refused = Receipt(s.idempotency("r"), "f1", 60_000)
    envelope = {"error": {"code": "conflict", "message": "call x already has a result"}}
    await broker.core.redis.set(refused.key, "H409 f1 " + json.dumps(envelope), px=60_000)
    with pytest.raises(Conflict, match=r"^call x already has a result$"):
        await broker.clients.answer(session_id, WEB, call_id, "done", is_error=False, receipt=refused)
    assert (await types(broker, session_id)).count("client_tool_acked") == 0
