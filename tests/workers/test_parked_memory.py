"""A worker's memory does not grow with the runs that wait: runs parked on an approval, stepped through a
real worker, leave every structure it keeps per session within its bound, and past those bounds more
parked runs add nothing to what its code holds (issue 37, "API and worker memory flat")."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from typing import Any

import pytest

from broker import Broker, keys
from broker.partitions import partition_of
from broker.services.credentials import operator_actor
from broker.services.providers import SCRIPTED_PROVIDER_ID
from common.codec import uuid7
from switchboard.settings import Settings
from tests.helpers import SCRIPTED_MODEL_CONFIG
from tests.stack import run_worker
from workers import keeper, steps, worker
from workers.keeper import Keeper
from workers.models import registry
from workers.models.registry import ModelRegistry
from workers.transcript import Transcripts

pytestmark = pytest.mark.both_redis

# The bounds, small here so a few hundred sessions fill them (a deployment's are 2,048, 256 and 4,096).
SESSIONS_KEPT = 64
VERSIONS_KEPT = 4
BATCH = 300
# The sessions' partitions: a few, so what the keeper holds a partition (bounded by the partition count,
# 1,024) is all there after the first batch and the second measures what a session adds.
PARTITIONS_USED = 8
GATED: dict[str, Any] = {
    "model": SCRIPTED_MODEL_CONFIG,
    "server_tools": ["calculate"],
    "server_tool_policies": {"calculate": "require_approval"},
}
APPROVAL_TEXT = '/call calculate {"expression": "6*7"}'
# What the project's own modules may still hold more of after the second batch, per session: well under
# any entry kept per session (a dict entry keyed by a session id is over 150 bytes).
NOISE_BYTES_PER_SESSION = 40


class _Made:
    """The worker's registry, conversation cache and keeper, as it makes them."""

    def __init__(self) -> None:
        self.models: list[ModelRegistry] = []
        self.transcripts: list[Transcripts] = []
        self.keepers: list[Keeper] = []


def _recorded(monkeypatch: pytest.MonkeyPatch) -> _Made:
    made = _Made()

    class Models(ModelRegistry):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.models.append(self)

    class Folded(Transcripts):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.transcripts.append(self)

    class Keeping(Keeper):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.keepers.append(self)

    monkeypatch.setattr(worker, "ModelRegistry", Models)
    monkeypatch.setattr(steps, "Transcripts", Folded)
    monkeypatch.setattr(worker, "Keeper", Keeping)
    return made


async def _park(broker: Broker, version: tuple[str, str], count: int) -> None:
    """`count` sessions on `version` (agent id, version id), each with a run the worker parks on an
    approval; returns once every one has its approval_requested."""
    agent_id, version_id = version
    sessions: list[str] = []
    while len(sessions) < count:
        session_id = uuid7()
        if partition_of(session_id) < PARTITIONS_USED:
            sessions.append(session_id)
    for session_id in sessions:
        await broker.sessions.create(
            session_id,
            agent_id=agent_id,
            version_id=version_id,
            display_name="",
            created_by=operator_actor(broker.workspace_id),
            token=broker.sessions.new_token(session_id),
            policy="steer",
        )
        submitted = await broker.runs.submit(session_id, uuid7(), uuid7(), APPROVAL_TEXT, "client")
        assert submitted.outcome == "new_run"
    waiting = set(sessions)
    async with asyncio.timeout(30):
        while waiting:
            await asyncio.sleep(0.1)
            for session_id in list(waiting):
                if any(b"approval_requested" in bytes(data) for _, data in await broker.log.after(session_id, 0, 50)):
                    waiting.discard(session_id)


def _own_bytes() -> int:
    """What the project's own code allocated and still holds (garbage collected first: a cycle waiting
    for its collection is not held)."""
    gc.collect()
    mine = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, f"*/{package}/*") for package in ("workers", "broker", "common")]
    )
    return sum(stat.size for stat in mine.statistics("filename"))


async def test_parked_runs_leave_the_worker_within_its_bounds(
    broker: Broker, settings: Settings, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "MAX_SESSIONS", SESSIONS_KEPT)
    monkeypatch.setattr(registry, "MAX_VERSIONS", VERSIONS_KEPT)
    monkeypatch.setattr(keys, "_SESSIONS_KEPT", SESSIONS_KEPT)
    made = _recorded(monkeypatch)
    idle_s = 0.5
    quick = settings.model_copy(update={"worker_transcript_idle_s": idle_s})
    agent = await broker.agents.create("parked", uuid7())
    published = await broker.agents.publish(agent.id, uuid7(), GATED, SCRIPTED_PROVIDER_ID)
    version = (agent.id, published.id)
    async with run_worker(quick, redis_url):
        # The first batch fills every bound; the second is measured. Traced from the start: an entry a
        # full cache lets go is then counted off as its successor is counted on.
        tracemalloc.start()
        try:
            await _park(broker, version, BATCH)
            await asyncio.sleep(idle_s * 3)
            before = _own_bytes()
            await _park(broker, version, BATCH)
            await asyncio.sleep(idle_s * 3)
            grown = _own_bytes() - before
        finally:
            tracemalloc.stop()
        (models,), (transcripts,), (keeping,) = made.models, made.transcripts, made.keepers
        # Filled (ten times as many were stepped) and no further.
        assert len(models._sessions) == SESSIONS_KEPT
        assert len(models._versions) <= VERSIONS_KEPT
        assert len(models._broker.core.keys._sessions) <= SESSIONS_KEPT
        # Every conversation went once its run parked (no step read it for idle_s).
        assert transcripts.held_bytes == 0
        assert len(transcripts._sessions) == 0
        # The keeper's visits: one live entry a partition it keeps, at most, and a bounded heap.
        assert len(keeping._next) <= len(keeping.owned)
        assert len(keeping._heap) <= 2 * len(keeping._next) + keeper._HEAP_SLACK
    assert grown < NOISE_BYTES_PER_SESSION * BATCH, f"{grown} bytes more for {BATCH} more parked runs"
