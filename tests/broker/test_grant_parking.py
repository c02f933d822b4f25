"""A grant's call parked between turns, through the scripts alone: woken by its timer for any worker, taken
up again when its worker stops mid-turn (a few times, then interrupted), and a cancel owed at its server
once it settles without the worker that followed its task."""

from __future__ import annotations

import asyncio

import pytest

from broker import Broker
from broker.services.server_calls import ServerCall, TaskCancel
from tests.helpers import SCRIPTED_CONFIG, call, commit, log_events, make_session, owed_work, start_run

pytestmark = pytest.mark.both_redis

CONFIG = {**SCRIPTED_CONFIG, "server_tools": ["calculate"]}


async def running(broker: Broker) -> tuple[str, str]:
    session_id = await make_session(broker, CONFIG)
    run_id = await start_run(broker, session_id)
    made = call("calculate", {"expression": "1+1"})
    assert (await commit(broker, session_id, run_id, [made], CONFIG)).outcome == "waiting"
    assert isinstance(await broker.server_calls.begin(session_id, made.call_id), ServerCall)
    return session_id, made.call_id


async def due_now(broker: Broker, session_id: str, call_id: str) -> None:
    """Make the call's deadline timer due (a lease lapsing, or its next poll's time come)."""
    keys = broker.core.keys
    deadlines = keys.session(session_id).partition.deadlines
    await broker.core.client_for(deadlines).zadd(deadlines, {f"{session_id}:{call_id}": 0})


async def test_a_parked_call_is_woken_for_any_worker_with_its_task_and_time_left(broker: Broker) -> None:
    session_id, call_id = await running(broker)
    assert await broker.server_calls.park(session_id, call_id, "task-9", wake_s=0.001, left_s=60)
    # Held by no worker: a renewal finds it is not running.
    assert not await broker.server_calls.renew(session_id, call_id)
    await asyncio.sleep(0.01)
    assert await broker.timers.expire_call(session_id, call_id) == "queued"
    assert f"t|{session_id}|{call_id}" in await owed_work(broker, session_id)
    taken = await broker.server_calls.begin(session_id, call_id)
    assert isinstance(taken, ServerCall)
    assert taken.parked is not None
    assert taken.parked["task"] == "task-9"
    assert taken.left_s is not None
    assert 55 < taken.left_s <= 60


async def test_a_worker_stopping_mid_turn_leaves_it_to_another_a_few_times(broker: Broker) -> None:
    session_id, call_id = await running(broker)
    assert await broker.server_calls.park(session_id, call_id, "task-9", wake_s=0.001, left_s=60)
    for _ in range(3):
        await due_now(broker, session_id, call_id)
        assert await broker.timers.expire_call(session_id, call_id) == "queued"
        assert isinstance(await broker.server_calls.begin(session_id, call_id), ServerCall)
        # Its worker stops during the turn: the lease lapses.
        await due_now(broker, session_id, call_id)
    assert await broker.timers.expire_call(session_id, call_id) == "queued"
    assert isinstance(await broker.server_calls.begin(session_id, call_id), ServerCall)
    await due_now(broker, session_id, call_id)
    assert await broker.timers.expire_call(session_id, call_id) == "failed"
    (result,) = [e for e in await log_events(broker, session_id) if e["type"] == "tool_result"]
    assert result["is_error"] is True
    # Its task is still live at the server: its cancel is owed, handed out once.
    assert await broker.server_calls.begin(session_id, call_id) == TaskCancel("", "task-9")
    assert await broker.server_calls.begin(session_id, call_id) is None


async def test_a_parked_call_cancelled_owes_its_tasks_cancel(broker: Broker) -> None:
    session_id, call_id = await running(broker)
    assert await broker.server_calls.park(session_id, call_id, "task-9", wake_s=30, left_s=60)
    await broker.calls.cancel(session_id, call_id)
    assert f"t|{session_id}|{call_id}" in await owed_work(broker, session_id)
    assert await broker.server_calls.begin(session_id, call_id) == TaskCancel("", "task-9")
    # Settled: a park or a wake that comes late changes nothing.
    assert not await broker.server_calls.park(session_id, call_id, "task-9", wake_s=1, left_s=1)
    assert await broker.timers.expire_call(session_id, call_id) == "settled"
