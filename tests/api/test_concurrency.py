"""Message concurrency: what input that arrives during a run does, by the agent's policy."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.api_client import Api, Event, of_type, types

pytestmark = pytest.mark.both_redis


def ended(count: int) -> Any:
    return lambda events: len([e for e in events if e["type"] in ("run_completed", "run_cancelled")]) >= count


def answers(events: list[Event]) -> list[str]:
    return [m["message"]["content"][0]["data"]["text"] for m in of_type(events, "message_assistant")]


def users(events: list[Event]) -> list[tuple[str, str]]:
    return [(m["message"]["content"][0]["data"]["text"], m["source"]) for m in of_type(events, "message_user")]


async def test_queue_runs_each_input_in_order(api: Api) -> None:
    session = await api.session(message_concurrency="queue")
    first = await api.send(session, "/sleep 0.3")
    second, third = await api.send(session, "second"), await api.send(session, "third")
    assert {second["outcome"], third["outcome"]} == {"new_run"}
    assert len({first["run_id"], second["run_id"], third["run_id"]}) == 3
    queued = await api.events(session)
    # Queued runs are announced at once; their input joins the log when they start.
    assert [e["run_id"] for e in of_type(queued, "run_queued")] == [first["run_id"], second["run_id"], third["run_id"]]
    events = await api.wait_for(session, ended(3))
    assert answers(events) == ["You said: /sleep 0.3", "You said: second", "You said: third"]
    completed = [e["run_id"] for e in of_type(events, "run_completed")]
    assert completed == [first["run_id"], second["run_id"], third["run_id"]]
    starts = [e["run_id"] for e in of_type(events, "run_started")]
    assert starts == completed


async def test_latest_keeps_the_newest_and_shows_it_everything(api: Api) -> None:
    session = await api.session(message_concurrency="latest")
    await api.send(session, "/sleep 0.3")
    second, third = await api.send(session, "second"), await api.send(session, "third")
    events = await api.wait_for(session, ended(3))
    assert [e["run_id"] for e in of_type(events, "run_cancelled")] == [second["run_id"]]
    assert of_type(events, "run_completed")[-1]["run_id"] == third["run_id"]
    assert users(events) == [("/sleep 0.3", "client"), ("second", "client"), ("third", "client")]
    assert answers(events)[-1] == "You said: third"


async def test_merge_folds_waiting_input_into_one_message(api: Api) -> None:
    session = await api.session(message_concurrency="merge")
    await api.send(session, "/sleep 0.3")
    second, third = await api.send(session, "second"), await api.send(session, "third")
    events = await api.wait_for(session, ended(3))
    assert [e["run_id"] for e in of_type(events, "run_cancelled")] == [second["run_id"]]
    assert users(events)[-1] == ("second\n\nthird", "client")
    assert answers(events)[-1] == "You said: second\n\nthird"
    assert of_type(events, "run_completed")[-1]["run_id"] == third["run_id"]


async def test_drop_refuses_input_during_a_run_and_writes_nothing(api: Api) -> None:
    session = await api.session(message_concurrency="drop")
    await api.send(session, "/sleep 0.3")
    before = await api.wait_for(session, lambda es: bool(of_type(es, "run_started")))
    async with api.as_session(session) as client:
        refused = await client.post(f"/v1/sessions/{session.id}/events", json={"type": "input", "text": "no"})
    assert refused.status_code == 409
    assert "drops input" in refused.json()["error"]["message"]
    assert await api.events(session) == before
    events = await api.wait_for(session, ended(1))
    assert answers(events) == ["You said: /sleep 0.3"]
    # Once idle, input is taken again.
    await api.send(session, "now")
    assert answers(await api.wait_for(session, ended(2)))[-1] == "You said: now"


async def test_debounce_waits_for_a_quiet_spell_then_takes_the_latest(api: Api) -> None:
    session = await api.session(message_concurrency={"strategy": "debounce", "debounce_ms": 400})
    loop = asyncio.get_running_loop()
    # No overlap, no wait: the first input starts at once.
    first = await api.send(session, "/sleep 0.2")
    await api.send(session, "a")
    await asyncio.sleep(0.15)
    last = await api.send(session, "b")
    sent_at = loop.time()
    events = await api.wait_for(session, ended(3))
    started = loop.time()
    assert [e["run_id"] for e in of_type(events, "run_completed")] == [first["run_id"], last["run_id"]]
    assert len(of_type(events, "run_cancelled")) == 1
    assert answers(events)[-1] == "You said: b"
    # The last run began only after 400 ms without input (and took a few ms more to answer).
    assert started - sent_at >= 0.35


async def test_steer_is_the_default(api: Api) -> None:
    session = await api.session()
    first = await api.send(session, "/sleep 0.3")
    steered = await api.send(session, "more")
    assert steered == {"outcome": "steered", "run_id": first["run_id"]}
    events = await api.wait_for(session, ended(1))
    assert users(events) == [("/sleep 0.3", "client"), ("more", "steer")]
    assert types(events).count("run_completed") == 1


async def test_cancel_ends_the_active_run_and_the_queue_goes_on(api: Api) -> None:
    session = await api.session(message_concurrency="queue")
    first = await api.send(session, "/sleep 30")
    second = await api.send(session, "after")
    await api.wait_for(session, lambda es: bool(of_type(es, "run_started")))
    async with api.as_session(session) as client:
        assert (await client.post(f"/v1/sessions/{session.id}/cancel")).json() == {"run_id": first["run_id"]}
    events = await api.wait_for(session, ended(2))
    assert of_type(events, "run_cancelled")[0]["run_id"] == first["run_id"]
    assert of_type(events, "run_completed")[0]["run_id"] == second["run_id"]
