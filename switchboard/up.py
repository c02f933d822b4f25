"""`switchboard up`: Redis (embedded unless a URL is set), the API and one worker, stopped together.

`up` owns its children. They run in a session of their own, so a Ctrl-C in the terminal reaches `up`
alone, which stops the API and the worker before Redis (nothing logs a lost connection); SIGINT, SIGTERM
and SIGHUP all stop them; and each is set to die with `up` (PR_SET_PDEATHSIG, Linux), so even a
SIGKILLed `up` leaves nothing running. A lock on the data directory keeps a second `up` off the same
files: it refuses at once, naming the running one's pid and URL, before it touches anything. The ports
are tried next, before anything starts (switchboard/ports.py), and "is up" is said only once the API this
`up` started answers readiness with the instance id `up` gave it.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from api.settings import ApiSettings
from broker import BrokerSettings
from broker.services.credentials import API_KEY_PREFIX
from broker.transport.embedded import EmbeddedRedis, die_with_parent
from common.settings import env_names
from switchboard.ports import check_ports
from switchboard.settings import Settings
from workers.settings import WorkerSettings

_READY_WAIT_S = 30.0
_STOP_WAIT_S = 30.0
_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stopped(Exception):
    """A signal asked `up` to stop."""


@dataclass
class _Child:
    name: str
    process: subprocess.Popen[bytes]


def _dev_key(settings: Settings) -> str:
    """The bootstrap key if one is set, else a development key kept in the data dir across restarts."""
    if settings.bootstrap_api_key is not None:
        return settings.bootstrap_api_key.get_secret_value()
    path = settings.dev_key_path
    if path.exists():
        return path.read_text().strip()
    key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


def _lock(data_dir: Path, api_url: str) -> int:
    """Hold the data directory for this `up` (released by the kernel however it ends); a second `up`
    refuses, naming the first."""
    data_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(data_dir / "up.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held = os.read(descriptor, 4096)
        os.close(descriptor)
        try:
            holder = json.loads(held)
            who = f"pid {holder['pid']}, serving {holder['url']}"
        except (ValueError, KeyError, TypeError):
            who = "its pid and URL unknown"
        raise SystemExit(
            f"switchboard up: another `switchboard up` is running on {data_dir.resolve()} ({who}); "
            "stop it first, or give this one its own SWITCHBOARD_DATA_DIR"
        ) from None
    os.ftruncate(descriptor, 0)
    os.write(descriptor, json.dumps({"pid": os.getpid(), "url": api_url}).encode())
    return descriptor


def _answers_as(url: str, instance: str) -> bool:
    """Whether the server at `url` is ready and is the API started with `instance` (whatever else
    answers on the port, another `up` included, is not)."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=1) as answer:  # noqa: S310 (our own http URL)
            body = json.loads(answer.read(4096))
    except (OSError, ValueError):
        return False
    return isinstance(body, dict) and body.get("status") == "ready" and body.get("instance") == instance


def wait_ready(url: str, instance: str, children: list[_Child], wait_s: float = _READY_WAIT_S) -> None:
    """Until the API started with `instance` answers ready at `url`; SystemExit if a child exits first or
    `wait_s` passes."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if any(child.process.poll() is not None for child in children):
            raise SystemExit("switchboard up: a process exited during start; see its output above")
        if _answers_as(url, instance):
            return
        time.sleep(0.2)
    raise SystemExit(f"switchboard up: the API it started did not answer at {url} within {wait_s:g} s")


def _stop(children: list[_Child]) -> None:
    """SIGTERM to all at once, each waited for; one line per process."""
    for child in children:
        if child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
    for child in children:
        try:
            code = child.process.wait(timeout=_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            child.process.kill()
            code = child.process.wait()
        print(f"switchboard up: {child.name} stopped (pid {child.process.pid}, {_outcome(code)})", flush=True)


def _outcome(code: int) -> str:
    if code == 0 or code == -signal.SIGTERM:
        return "clean"
    return f"exit {code}" if code > 0 else f"signal {signal.Signals(-code).name}"


def _on_signal(signum: int, _: FrameType | None) -> None:
    raise _Stopped(signal.Signals(signum).name)


def role_env(env: dict[str, str], role: type[BrokerSettings]) -> dict[str, str]:
    """`env` less the settings of the other roles (names read case-blind, as the settings read them): the
    API is never handed the model providers' keys, nor the worker the bootstrap key."""
    others = env_names(Settings) - env_names(role)
    return {name: value for name, value in env.items() if name.upper() not in others}


def _spawn(name: str, env: dict[str, str]) -> _Child:
    # A session of their own (the terminal's Ctrl-C is `up`'s to handle), and dead when `up` is.
    process = subprocess.Popen(
        [sys.executable, "-m", "switchboard", name], env=env, start_new_session=True, preexec_fn=die_with_parent()
    )
    return _Child(name, process)


def run(settings: Settings) -> int:
    api_url = settings.local_api_url
    lock = _lock(settings.data_dir, api_url)
    try:
        ports = check_ports(settings)
    except SystemExit:
        os.close(lock)
        raise
    if ports.note:
        print(ports.note, flush=True)
    instance = secrets.token_hex(8)
    for stopping in _STOPPING:
        signal.signal(stopping, _on_signal)
    redis: EmbeddedRedis | None = None
    children: list[_Child] = []
    try:
        url = settings.redis_url
        if url is None:
            redis = EmbeddedRedis(settings.data_dir / "redis", persistent=True, owned=True)
            redis.start()
            url = redis.url
        key = _dev_key(settings)
        # Text logs for a terminal unless asked otherwise.
        env = {
            "SWITCHBOARD_LOG_FORMAT": "text",
            **os.environ,
            "SWITCHBOARD_REDIS_URL": url,
            "SWITCHBOARD_BOOTSTRAP_API_KEY": key,
            "SWITCHBOARD_INSTANCE_ID": instance,
            "SWITCHBOARD_WORKER_METRICS_PORT": str(ports.metrics),
        }
        children = [_spawn("api", role_env(env, ApiSettings)), _spawn("worker", role_env(env, WorkerSettings))]
        wait_ready(api_url, instance, children)
        where = f" (embedded, AOF under {Path(settings.data_dir) / 'redis'})" if redis else ""
        # Where the key is, for scripts run from any directory (SWITCHBOARD_API_KEY works as well).
        key_line = "" if settings.bootstrap_api_key else f"  Key file:     {settings.dev_key_path.resolve()}\n"
        print(
            f"\nSwitchboard is up.\n"
            f"  Start here:   {api_url}/   (the demo, the console and the API docs, with first steps)\n"
            f"  Demo:         {api_url}/demo#key={key}\n"
            f"  Console:      {api_url}/console#key={key}\n"
            f"  API:          {api_url}   (OpenAPI docs at {api_url}/docs)\n"
            f"  API key:      {key}\n"
            f"{key_line}"
            f"  Redis:        {url}{where}\n"
            f"Ctrl-C (or SIGTERM, SIGHUP) stops everything.\n",
            flush=True,
        )
        while all(child.process.poll() is None for child in children):
            time.sleep(0.5)
        failed = next(child for child in children if child.process.poll() is not None)
        print(f"switchboard up: {failed.name} exited on its own; stopping the rest", file=sys.stderr, flush=True)
        return 1
    except (KeyboardInterrupt, _Stopped):
        return 0
    finally:
        # A second Ctrl-C must not cut the stop short.
        for stopping in _STOPPING:
            signal.signal(stopping, signal.SIG_IGN)
        _stop(children)
        if redis is not None:
            pid = redis.pid
            redis.stop()
            print(f"switchboard up: redis stopped (pid {pid})", flush=True)
        os.close(lock)
