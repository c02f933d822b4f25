"""A step waiting for sign-ins, in Redis alone: it holds no worker while it waits; the last of its sign-ins to
end (completed, declined, run out) queues it again as its next try, exactly once; a try that is not the
step's, a wait asked twice and a sign-in that ended before the wait change nothing they should not."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.broker import Broker
from broker.errors import Conflict
from broker.keys import KeySpace
from broker.services.runs import RUN_GONE_CANCELLED
from common.codec import now_ms
from switchboard.settings import Settings
from tests.helpers import held_work, log_events, make_session, owed_work, start_run, work_entries

pytestmark = pytest.mark.both_redis

SERVER = "https://mcp.example.com/mcp"


async def asked(broker: Broker[Settings], session_id: str, grant: str = "notes", wait_ms: int = 60_000) -> str:
    """A sign-in the session's person is asked for, as a step's `ask` records it."""
    authorization_id = str(uuid.uuid4())
    outcome, _ = await broker.mcp_authorizations.require(
        session_id,
        authorization_id=authorization_id,
        grant=grant,
        server_url=SERVER,
        url="https://as.example.com/authorize?state=x",
        expires_at_ms=now_ms() + wait_ms,
    )
    assert outcome == "asked"
    return authorization_id


async def wait(broker: Broker[Settings], session_id: str, run_id: str, *ids: str, attempt: int = 0) -> str:
    return await broker.mcp_authorizations.wait(session_id, run_id, 0, attempt, ids, RUN_GONE_CANCELLED)


async def run_fields(broker: Broker[Settings], session_id: str) -> dict[str, str]:
    found = await broker.core.redis.hgetall(broker.core.keys.session(session_id).run)
    return {bytes(k).decode(): bytes(v).decode() for k, v in found.items()}


async def timer(broker: Broker[Settings], session_id: str, authorization_id: str) -> float | None:
    deadlines = broker.core.keys.session(session_id).partition.deadlines
    score = await broker.core.client_for(deadlines).zscore(
        deadlines, KeySpace.sign_in_deadline(session_id, authorization_id)
    )
    return None if score is None else float(score)


async def test_a_step_waits_held_by_no_worker_until_its_sign_in_completes(broker: Broker[Settings]) -> None:
    session_id = await make_session(broker)
    run_id = await start_run(broker, session_id)
    signing = await asked(broker, session_id)
    assert await wait(broker, session_id, run_id, signing) == "waiting"
    assert await held_work(broker, session_id) == []
    fields = await run_fields(broker, session_id)
    assert (fields["state"], fields["pending"]) == ("waiting", "1")
    assert await timer(broker, session_id, signing) is not None
    # The same try asking again (a retry after a lost answer), and another try: nothing changes.
    assert await wait(broker, session_id, run_id, signing) == "stale"
    assert await wait(broker, session_id, run_id, signing, attempt=1) == "stale"
    assert (await run_fields(broker, session_id))["pending"] == "1"

    await broker.mcp_authorizations.complete(session_id, signing, "notes", SERVER)
    assert await owed_work(broker, session_id) == [f"s|{session_id}|{run_id}|0|1"]
    assert await timer(broker, session_id, signing) is None
    assert (await run_fields(broker, session_id))["state"] == "queued"
    # A completion recorded twice wakes nothing more.
    await broker.mcp_authorizations.complete(session_id, signing, "notes", SERVER)
    assert await owed_work(broker, session_id) == [f"s|{session_id}|{run_id}|0|1"]
    assert await broker.runs.begin(session_id, run_id, 0, 1, 25) == "run"


async def test_the_last_of_two_sign_ins_to_end_wakes_the_step(broker: Broker[Settings]) -> None:
    session_id = await make_session(broker)
    run_id = await start_run(broker, session_id)
    notes = await asked(broker, session_id, "notes")
    docs = await asked(broker, session_id, "docs", wait_ms=300)
    assert await wait(broker, session_id, run_id, notes, docs, notes) == "waiting"
    assert (await run_fields(broker, session_id))["pending"] == "2"

    assert await broker.mcp_authorizations.decline(session_id, notes) == "notes"
    assert await owed_work(broker, session_id) == []
    assert await timer(broker, session_id, notes) is None
    with pytest.raises(Conflict, match="ended already"):
        await broker.mcp_authorizations.decline(session_id, notes)

    assert await broker.mcp_authorizations.expire(session_id, docs) == "not_due"
    await asyncio.sleep(0.4)
    assert await broker.mcp_authorizations.expire(session_id, docs) == "expired"
    assert await broker.mcp_authorizations.expire(session_id, docs) == "settled"
    assert await owed_work(broker, session_id) == [f"s|{session_id}|{run_id}|0|1"]
    ended = [e for e in await log_events(broker, session_id) if e["type"] == "mcp_authorization_declined"]
    assert [(e["authorization_id"], e["grant"], e["server_url"], e["reason"]) for e in ended] == [
        (notes, "notes", SERVER, "declined"),
        (docs, "docs", SERVER, "expired"),
    ]
    latest = await broker.mcp_authorizations.asked(session_id, "docs")
    assert latest is not None
    assert (latest.authorization_id, latest.state, latest.run_id) == (docs, "expired", run_id)


async def test_a_sign_in_that_ended_before_the_wait_queues_the_step_at_once(broker: Broker[Settings]) -> None:
    session_id = await make_session(broker)
    run_id = await start_run(broker, session_id)
    signing = await asked(broker, session_id)
    await broker.mcp_authorizations.decline(session_id, signing)
    assert await wait(broker, session_id, run_id, signing, "never-asked", "g:notes") == "queued"
    assert await owed_work(broker, session_id) == [f"s|{session_id}|{run_id}|0|1"]
    assert await timer(broker, session_id, signing) is None


async def test_a_cancel_ends_a_waiting_run_and_a_late_sign_in_wakes_nothing(broker: Broker[Settings]) -> None:
    session_id = await make_session(broker)
    run_id = await start_run(broker, session_id)
    signing = await asked(broker, session_id)
    assert await wait(broker, session_id, run_id, signing) == "waiting"
    assert await broker.runs.cancel_run(session_id) == (run_id, True)
    await broker.mcp_authorizations.complete(session_id, signing, "notes", SERVER)
    assert await owed_work(broker, session_id) == []
    assert await run_fields(broker, session_id) == {}


async def test_a_cancel_asked_while_the_step_ran_ends_the_run_instead_of_waiting(broker: Broker[Settings]) -> None:
    session_id = await make_session(broker)
    run_id = await start_run(broker, session_id)
    signing = await asked(broker, session_id)
    assert await broker.runs.cancel_run(session_id) == (run_id, False)
    assert await wait(broker, session_id, run_id, signing) == "cancelled"
    assert [e["type"] for e in await log_events(broker, session_id)][-1] == "run_cancelled"
    assert await timer(broker, session_id, signing) is None


async def test_a_member_that_names_no_sign_in_of_the_session_is_left_to_the_calls(broker: Broker[Settings]) -> None:
    session_id = await make_session(broker)
    deadlines = broker.core.keys.session(session_id).partition.deadlines
    await asked(broker, session_id)
    for lookalike in ("call_lookalike", "g:notes"):
        member = KeySpace.sign_in_deadline(session_id, lookalike)
        await broker.core.client_for(deadlines).zadd(deadlines, {member: now_ms() - 1})
        assert await broker.mcp_authorizations.expire(session_id, lookalike) == "unknown"
        # Left in the index for expire_call.lua, whose member it is.
        assert await broker.core.client_for(deadlines).zscore(deadlines, member) is not None


async def test_a_worker_that_stops_after_asking_and_before_waiting_loses_nothing(broker: Broker[Settings]) -> None:
    session_id = await make_session(broker)
    run_id = await start_run(broker, session_id)
    signing = await asked(broker, session_id)
    # Its worker stopped here: the step's lease lapses (as if its time passed) and the step is reclaimed.
    await broker.core.redis.hset(broker.core.keys.session(session_id).run, "lease_until", 0)
    await broker.runs.reclaim(session_id)
    (entry,) = [e for e, m in await work_entries(broker, session_id) if m == f"s|{session_id}|{run_id}|0|1"]
    assert await broker.runs.begin(session_id, run_id, 0, 1, 25, entry) == "run"
    # The next try finds the sign-in still pending (asked once) and waits for it; the stopped try's late
    # wait changes nothing.
    latest = await broker.mcp_authorizations.asked(session_id, "notes")
    assert latest is not None
    assert (latest.authorization_id, latest.state) == (signing, "pending")
    assert await wait(broker, session_id, run_id, signing, attempt=1) == "waiting"
    assert await wait(broker, session_id, run_id, signing) == "stale"
    assert await held_work(broker, session_id) == []
    await broker.mcp_authorizations.complete(session_id, signing, "notes", SERVER)
    assert await owed_work(broker, session_id) == [f"s|{session_id}|{run_id}|0|2"]
