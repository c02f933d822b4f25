"""Scripts.pipelined: several partitions' calls in one round trip to their node, each answered alone."""

from __future__ import annotations

import pytest

from broker import Broker
from broker.errors import NotFound
from broker.scripts.runner import Group
from tests.helpers import log_events
from tests.workers.test_schedules import fired, redis_now, schedule, sessions_of_one_partition

pytestmark = pytest.mark.both_redis


async def test_each_call_of_a_pipeline_answers_alone_and_a_batch_runs_each_call_once(broker: Broker) -> None:
    sessions = await sessions_of_one_partition(broker, 3)
    now = await redis_now(broker, sessions[0])
    due = sorted([(sid, await schedule(broker, sid, now - 10)) for sid in sessions])
    keys = broker.core.keys
    partition = keys.session(sessions[0]).partition
    found = await broker.core.scripts.run("read_schedules", *broker.schedules._reading(due), partition=partition)
    calls, _ = broker.schedules._firings(due, found, now)
    unknown = (
        {"meta": keys.session(sessions[0]).meta, "session_schedules": keys.session(sessions[0]).schedules},
        {"sid": sessions[0], "id": "no-such-schedule"},
    )
    groups: list[Group] = [
        ("delete_schedule", partition, [unknown]),
        # A BATCHED script's calls go as one batch; the same due times twice: the second fires nothing.
        ("fire_schedule", partition, [*calls, *calls]),
        ("sweep", partition, [({"handed": partition.handed}, {"batch": 500})]),
    ]
    refused, firings, swept = await broker.core.scripts.pipelined(broker.core.client_for(partition.alarm), groups)
    assert len(refused) == 1
    assert isinstance(refused[0], NotFound)
    assert [reply[0] for reply in firings if not isinstance(reply, Exception)] == ["new_run"] * 3 + ["stale"] * 3
    (reply,) = swept
    assert not isinstance(reply, Exception)
    # The sweep ran after the firings: nothing of theirs is due any more.
    assert reply[-1] == []
    for sid in sessions:
        assert len(fired(await log_events(broker, sid))) == 1
