"""The model registry keeps what a session's steps are read with by version, within bounds: a worker's
memory does not grow with the sessions it ever stepped (parked runs are stepped once, then wait)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from broker import Broker
from broker.errors import NotFound
from workers.models import registry
from workers.models.base import ModelError
from workers.models.registry import ModelRegistry
from workers.settings import WorkerSettings

CONFIG = {"model": {"format": "openai_responses", "model": "scripted", "max_tokens": 100}}


class _Store:
    """Sessions and agent versions, counting the reads."""

    def __init__(self) -> None:
        self.versions = {f"v{n}": {"config": CONFIG, "agent_id": f"a{n}"} for n in range(3)}
        self.sessions: dict[str, str] = {}
        self.session_reads = 0
        self.version_reads = 0

    async def get(self, session_id: str) -> Any:
        self.session_reads += 1
        if session_id not in self.sessions:
            raise NotFound(f"no session {session_id}")
        return SimpleNamespace(agent_version_id=self.sessions[session_id])

    async def version(self, version_id: str) -> Any:
        self.version_reads += 1
        if version_id not in self.versions:
            raise NotFound(f"no agent version {version_id}")
        found = self.versions[version_id]
        return SimpleNamespace(config=found["config"], secrets={}, model_provider_id="p", agent_id=found["agent_id"])


def _registry(store: _Store) -> ModelRegistry:
    broker = SimpleNamespace(settings=WorkerSettings(), sessions=store, agents=store)
    return ModelRegistry(cast("Broker[WorkerSettings]", broker))


async def test_sessions_of_one_version_share_its_config_read_once() -> None:
    store = _Store()
    store.sessions = {f"s{n}": "v0" for n in range(100)}
    models = _registry(store)
    configs = {id(await models.config_for(f"s{n}")) for n in range(100)}
    assert len(configs) == 1
    assert store.version_reads == 1
    assert await models.billed_to("s7") == ("p", "a0")
    assert store.session_reads == 100


async def test_past_the_bounds_the_oldest_go_and_are_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "MAX_SESSIONS", 2)
    monkeypatch.setattr(registry, "MAX_VERSIONS", 2)
    store = _Store()
    store.sessions = {"s0": "v0", "s1": "v1", "s2": "v2"}
    models = _registry(store)
    for session_id in ("s0", "s1", "s2"):
        await models.config_for(session_id)
    assert len(models._sessions) == len(models._versions) == 2
    # s0 (and its version) went first; the session's token counts still find their agent.
    assert await models.billed_to("s0") == ("p", "a0")
    assert (store.session_reads, store.version_reads) == (4, 4)
    # s2 was kept (read most recently but one): no read.
    await models.config_for("s2")
    assert (store.session_reads, store.version_reads) == (4, 4)


async def test_a_gone_session_or_version_is_a_model_error() -> None:
    store = _Store()
    store.sessions = {"s0": "gone"}
    models = _registry(store)
    with pytest.raises(ModelError, match="agent version is gone"):
        await models.config_for("s0")
    with pytest.raises(ModelError, match="agent version is gone"):
        await models.config_for("nobody")
