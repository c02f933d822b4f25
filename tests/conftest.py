"""Test session: one real redis-server on a free port; each test gets its own key prefix."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from broker import Broker
from broker.aio import command
from broker.embedded import EmbeddedRedis
from broker.settings import Settings

# Deadlines short enough that every failure path runs in about a second.
FAST = {
    "ack_timeout_s": 0.5,
    "result_timeout_s": 1.0,
    "sweep_interval_s": 0.05,
    "continuation_grace_s": 0.3,
    "worker_poll_delay_s": 0.01,
    "stream_keepalive_s": 1.0,
    "idempotency_wait_s": 2.0,
}


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = EmbeddedRedis(Path(tmp_path_factory.mktemp("redis")), persistent=False)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def key_prefix() -> str:
    return f"t{secrets.token_hex(5)}"


@pytest.fixture
def settings(redis_url: str, key_prefix: str, tmp_path: Path) -> Settings:
    return Settings(redis_url=redis_url, key_prefix=key_prefix, data_dir=tmp_path, **FAST)  # type: ignore[arg-type]


@pytest.fixture
async def broker(settings: Settings, redis_url: str) -> AsyncIterator[Broker]:
    opened = await Broker.connect(settings, redis_url)
    try:
        yield opened
    finally:
        await _drop_prefix(opened, settings.key_prefix)
        await opened.close()


async def _drop_prefix(broker: Broker, prefix: str) -> None:
    # SCAN is fine here: this is test teardown, not a request path.
    cursor = 0
    while True:
        cursor, keys = await command(broker.core.redis, "SCAN", cursor, "MATCH", f"{prefix}:*", "COUNT", 1000)
        if keys:
            await command(broker.core.redis, "UNLINK", *keys)
        if int(cursor) == 0:
            return
