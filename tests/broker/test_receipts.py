"""The hot routes' Idempotency-Key receipts: the outcome kept with its body (or a refusal with its reason
and values), and read in the two forms receipts had before outcomes (kept for the receipt ttl, so an
upgrade replays what was answered before it)."""

from __future__ import annotations

import json

import pytest

from api.schemas.clients import RegisteredClientBody
from api.schemas.common import optional_moment
from api.schemas.sessions import SubmitOutcomeBody
from broker import Broker
from broker.errors import Conflict, InvalidRequest, NotFound
from broker.services.clients import Receipt
from common.codec import uuid7
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


async def test_a_registration_keeps_its_answer_and_registers_once(broker: Broker) -> None:
    session_id = await make_session(broker)
    receipt = Receipt(broker.core.keys.session(session_id).idempotency("r"), "f1", 60_000)
    first = await broker.clients.register(session_id, WEB, "web", 60, [HIGHLIGHT], receipt)
    answer = json.loads(first.body)
    assert (answer["id"], answer["name"], first.expires_at is not None) == (WEB, "web", True)
    # The same key again: the first answer (its client id), and no second registration.
    again = await broker.clients.register(session_id, OTHER, "web", 60, [HIGHLIGHT], receipt)
    assert again == first
    assert [client.id for client in await broker.clients.active(session_id)] == [WEB]
    assert (await types(broker, session_id)).count("client_registered") == 1
    with pytest.raises(Conflict, match="already used with a different request"):
        await broker.clients.register(session_id, OTHER, "web", 60, [HIGHLIGHT], Receipt(receipt.key, "f2", 60_000))


async def test_a_registration_answers_what_the_pydantic_body_would(broker: Broker) -> None:
    session_id = await make_session(broker)
    for ttl in (None, 45):
        registered = await broker.clients.register(session_id, OTHER if ttl else WEB, "web", ttl, [HIGHLIGHT])
        expected = RegisteredClientBody.model_validate(
            {"id": registered.id, "name": registered.name, "expires_at": optional_moment(registered.expires_at)}
        ).model_dump_json()
        assert registered.body == expected


async def test_a_registration_refused_keeps_the_refusal(broker: Broker) -> None:
    session_id = await make_session(broker)
    s = broker.core.keys.session(session_id)
    for number in range(32):
        await broker.clients.register(session_id, f"0190f2a0-0000-7000-8000-{number:012d}", "w", None, [])
    receipt = Receipt(s.idempotency("full"), "f1", 60_000)
    with pytest.raises(InvalidRequest, match="already has 32 active clients"):
        await broker.clients.register(session_id, WEB, "web", None, [], receipt)
    kept = await broker.core.redis.get(receipt.key)
    assert kept is not None
    assert kept[:19] == b"invalid_request f1 "
    with pytest.raises(InvalidRequest, match="already has 32 active clients"):
        await broker.clients.register(session_id, WEB, "web", None, [], receipt)


async def test_a_registration_receipt_kept_by_the_generic_keyed_path_still_replays(broker: Broker) -> None:
    # Before registrations kept their receipts in their own script, api/keyed.py kept them
    # (idem_begin.lua, idem_finish.lua): settled, refused, or held by an attempt still running.
    session_id = await make_session(broker)
    s = broker.core.keys.session(session_id)
    body = json.dumps({"id": OTHER, "name": "web", "expires_at": None}, separators=(",", ":"))
    settled = Receipt(s.idempotency("settled"), "f1", 60_000)
    await broker.core.redis.set(settled.key, json.dumps({"fp": "f1", "outcome": "created", "body": body}))
    assert (await broker.clients.register(session_id, WEB, "web", None, [], settled)).body == body
    refused = Receipt(s.idempotency("refused"), "f1", 60_000)
    envelope = json.dumps({"error": {"code": "invalid_request", "message": "too many, as it was then"}})
    await broker.core.redis.set(refused.key, json.dumps({"fp": "f1", "outcome": "invalid_request", "body": envelope}))
    with pytest.raises(InvalidRequest, match=r"^too many, as it was then$"):
        await broker.clients.register(session_id, WEB, "web", None, [], refused)
    held = Receipt(s.idempotency("held"), "f1", 60_000)
    await broker.core.redis.set(held.key, json.dumps({"fp": "f1", "owner": "a", "lease": 1, "seed": "{}"}))
    with pytest.raises(Conflict, match="still being answered"):
        await broker.clients.register(session_id, WEB, "web", None, [], held)
    assert await broker.clients.active(session_id) == []


async def test_input_keeps_its_answer_and_is_taken_once(broker: Broker) -> None:
    session_id = await make_session(broker, policy="queue")
    receipt = Receipt(broker.core.keys.session(session_id).idempotency("input"), "f1", 60_000)
    first = await broker.runs.submit(session_id, uuid7(), uuid7(), "hello", "client", receipt=receipt)
    assert json.loads(first.body) == {"outcome": "new_run", "run_id": first.run_id}
    # The same key again: the first answer (its run), and the input is not taken a second time.
    again = await broker.runs.submit(session_id, uuid7(), uuid7(), "hello", "client", receipt=receipt)
    assert again == first
    assert (await types(broker, session_id)).count("run_queued") == 1
    with pytest.raises(Conflict, match="already used with a different request"):
        await broker.runs.submit(session_id, uuid7(), uuid7(), "hi", "client", receipt=Receipt(receipt.key, "f2", 1))
    # A receipt the generic keyed path kept replays as it was written.
    earlier = Receipt(broker.core.keys.session(session_id).idempotency("earlier"), "f1", 60_000)
    body = json.dumps({"outcome": "steered", "run_id": first.run_id}, separators=(",", ":"))
    await broker.core.redis.set(earlier.key, json.dumps({"fp": "f1", "outcome": "ok", "body": body}))
    replayed = await broker.runs.submit(session_id, uuid7(), uuid7(), "late", "client", receipt=earlier)
    assert (replayed.outcome, replayed.body) == ("steered", body)
    assert (await types(broker, session_id)).count("run_queued") == 1


async def test_input_answers_what_the_pydantic_body_would(broker: Broker) -> None:
    session_id = await make_session(broker)
    scoped = (uuid7(), [HIGHLIGHT])
    for taken in (
        await broker.runs.submit(session_id, uuid7(), uuid7(), "go", "client"),
        await broker.runs.submit(session_id, uuid7(), uuid7(), "steer", "client", scoped),
    ):
        expected = SubmitOutcomeBody.model_validate(
            {"outcome": taken.outcome, "run_id": taken.run_id, "client_id": taken.scoped_client_id}
        ).model_dump_json(exclude_none=True)
        assert taken.body == expected
    assert taken.scoped_client_id == scoped[0]
