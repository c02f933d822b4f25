"""Test session: one real redis-server on a free port; each test gets its own key prefix."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from broker import Broker
from broker.settings import Settings
from tests.api_client import Api
from tests.stack import Stack, opened_broker, running_stack, started_redis

# Deadlines short enough that every failure path runs in about a second.
FAST = {
    "ack_timeout_s": 0.5,
    "result_timeout_s": 1.0,
    "keeper_lease_s": 1.0,
    "stream_keepalive_s": 1.0,
    "idempotency_wait_s": 2.0,
    "step_lease_s": 1.0,
    "model_backoff_s": 0.02,
    "server_call_lease_s": 1.0,
}


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with started_redis(Path(tmp_path_factory.mktemp("redis"))) as url:
        yield url


@pytest.fixture
def key_prefix() -> str:
    return f"t{secrets.token_hex(5)}"


@pytest.fixture
def settings(redis_url: str, key_prefix: str, tmp_path: Path) -> Settings:
    return Settings(redis_url=redis_url, key_prefix=key_prefix, data_dir=tmp_path, **FAST)  # type: ignore[arg-type]


@pytest.fixture
async def broker(settings: Settings, redis_url: str) -> AsyncIterator[Broker]:
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
