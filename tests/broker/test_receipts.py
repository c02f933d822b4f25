"""The hot routes' Idempotency-Key receipts: written in their own form, and read in the JSON form that
receipts had before (kept for the receipt ttl, so an upgrade replays what was answered before it)."""

from __future__ import annotations

import json

from broker import Broker
from broker.clients import Receipt
from tests.helpers import HIGHLIGHT, call, commit, make_session, start_run, types

WEB = "0190f2a0-0000-7000-8000-00000000000a"


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
    assert first.status == 200
    again = await broker.clients.ack(session_id, WEB, call_id, receipt=receipt)
    assert (again.status, again.body) == (200, first.body)
    other = Receipt(receipt.key, "f2", 60_000)
    assert (await broker.clients.ack(session_id, WEB, call_id, receipt=other)).status == 409


async def test_a_receipt_written_in_the_earlier_json_form_still_replays(broker: Broker) -> None:
    session_id, call_id = await waiting_call(broker)
    receipt = Receipt(broker.core.keys.session(session_id).idempotency("k"), "f1", 60_000)
    await broker.core.redis.set(receipt.key, json.dumps({"fp": "f1", "status": 204, "body": ""}), px=60_000)
    replayed = await broker.clients.answer(session_id, WEB, call_id, "done", is_error=False, receipt=receipt)
    assert (replayed.status, replayed.body) == (204, "")
    # It was answered before: the replay does not record the result again.
    assert (await types(broker, session_id)).count("tool_result") == 0
