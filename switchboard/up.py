"""`switchboard up`: Redis (embedded unless a URL is set), the API and one worker, stopped together."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from broker import Settings
from broker.embedded import EmbeddedRedis
from broker.settings import API_KEY_PREFIX

_READY_WAIT_S = 30.0


def _dev_key(settings: Settings) -> str:
    """The bootstrap key if one is set, else a development key kept in the data dir across restarts."""
    if settings.bootstrap_api_key is not None:
        return settings.bootstrap_api_key.get_secret_value()
    path = settings.data_dir / "dev-api-key"
    if path.exists():
        return path.read_text().strip()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


def _wait_ready(url: str, children: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + _READY_WAIT_S
    while time.monotonic() < deadline:
        if any(child.poll() is not None for child in children):
            raise SystemExit("switchboard up: a process exited during start; see its output above")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1) as answer:  # noqa: S310 (our own http URL)
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"switchboard up: the API was not ready within {_READY_WAIT_S:g} s")


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()


def run(settings: Settings) -> int:
    redis: EmbeddedRedis | None = None
    url = settings.redis_url
    if url is None:
        redis = EmbeddedRedis(settings.data_dir / "redis", persistent=True)
        redis.start()
        url = redis.url
    key = _dev_key(settings)
    # Text logs for a terminal unless asked otherwise.
    env = {
        "SWITCHBOARD_LOG_FORMAT": "text",
        **os.environ,
        "SWITCHBOARD_REDIS_URL": url,
        "SWITCHBOARD_BOOTSTRAP_API_KEY": key,
    }
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host  # noqa: S104 (read, not bound)
    api_url = f"http://{host}:{settings.port}"
    children: list[subprocess.Popen[bytes]] = []
    try:
        children.append(subprocess.Popen([sys.executable, "-m", "switchboard", "api"], env=env))
        children.append(subprocess.Popen([sys.executable, "-m", "switchboard", "worker"], env=env))
        _wait_ready(api_url, children)
        where = f" (embedded, AOF under {Path(settings.data_dir) / 'redis'})" if redis else ""
        print(
            f"\nSwitchboard is up.\n"
            f"  Demo:         {api_url}/demo#key={key}\n"
            f"  Console:      {api_url}/console#key={key}\n"
            f"  API:          {api_url}   (OpenAPI docs at {api_url}/docs)\n"
            f"  API key:      {key}\n"
            f"  Redis:        {url}{where}\n"
            f"Ctrl-C stops everything.\n",
            flush=True,
        )
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(children)
        if redis is not None:
            redis.stop()
