"""The scripts as a Redis before 7.0 runs them: each by its SHA (EVALSHA), the libraries it includes with it.

The Functions library defines every library once and shares it; a script's EVALSHA text holds only the
libraries it includes, so a script that uses what it does not include fails only here. The flows of the
call lifecycle and of a session's storage run again on that path."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from broker import Broker
from broker.scripts.runner import Scripts
from tests.broker import test_call_flow, test_session_storage
from tests.broker.test_session_storage import capped  # noqa: F401 (the capped broker, as a fixture here too)

pytestmark = pytest.mark.both_redis

Flow = Callable[[Broker], Awaitable[None]]


def _flows(module: object) -> list[Flow]:
    # Every flow that takes a broker alone (one test builds its own).
    skipped = {"test_no_cap_means_no_refusal"}
    return [getattr(module, name) for name in dir(module) if name.startswith("test_") and name not in skipped]


async def _by_sha(broker: Broker) -> Broker:
    core = broker.core
    core.scripts = Scripts(core.redis, core.slots, functions=False, max_session_bytes=core.scripts.max_session_bytes)
    await core.scripts.load()
    return broker


@pytest.mark.parametrize("flow", _flows(test_call_flow), ids=lambda flow: flow.__name__)
async def test_the_call_lifecycle_runs_script_by_script(broker: Broker, flow: Flow) -> None:
    await flow(await _by_sha(broker))


@pytest.mark.parametrize("flow", _flows(test_session_storage), ids=lambda flow: flow.__name__)
async def test_the_storage_count_runs_script_by_script(capped: Broker, flow: Flow) -> None:  # noqa: F811
    await flow(await _by_sha(capped))
