"""Real Switchboard processes (`switchboard api`, `switchboard worker`) on one Redis, for the tests and
the benchmarks that need them."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from broker.transport.embedded import free_port


def server_env(redis_url: str, **settings: str) -> tuple[dict[str, str], str]:
    """The environment of processes serving one test on `redis_url` under their own key prefix, and
    the bootstrap API key they create. `settings` are more `SWITCHBOARD_*` values (without the prefix)."""
    key = "swb_ak_" + secrets.token_urlsafe(32)
    env = {
        "SWITCHBOARD_REDIS_URL": redis_url,
        "SWITCHBOARD_KEY_PREFIX": f"p{secrets.token_hex(5)}",
        "SWITCHBOARD_BOOTSTRAP_API_KEY": key,
        # Workers of one test would share the default port; a test that reads one sets its own.
        "SWITCHBOARD_WORKER_METRICS_PORT": "0",
        # No balancer stands in front of a test's API, so its 2 s drain grace would only hold every stop up;
        # a test of draining sets its own.
        "SWITCHBOARD_DRAIN_GRACE_S": "0",
    }
    env |= {f"SWITCHBOARD_{name.upper()}": value for name, value in settings.items()}
    return env, key


# What uvicorn logs when the port it was given is taken (the process then exits with status 3).
_BIND_REFUSED = "address already in use"


class PortTaken(RuntimeError):
    """The port an API was started on was taken by another process before it could bind it."""


@dataclass
class Processes:
    """Starts and stops API and worker processes on one Redis; their output goes to files in `logs`."""

    env: dict[str, str]
    logs: Path
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _log_paths: dict[int, Path] = field(default_factory=dict)

    def _spawn(self, role: str, name: str, extra: dict[str, str]) -> subprocess.Popen[bytes]:
        path = self.logs / f"{name}.log"
        log = path.open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "switchboard", role],
            env={**os.environ, **self.env, **extra},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.running.append(process)
        self._log_paths[process.pid] = path
        return process

    def _log(self, process: subprocess.Popen[bytes]) -> str:
        return self._log_paths[process.pid].read_text(errors="replace")

    def api(self, port: int | None = None, name: str = "api") -> tuple[subprocess.Popen[bytes], str]:
        """An API process, ready; on a port of its own unless `port` is given. A free port can be taken by
        another process before the API binds it: then another is tried (a port the caller named is not)."""
        for attempt in range(1 if port else 3):
            chosen = port or free_port()
            process = self._spawn("api", f"{name}-{attempt}" if attempt else name, {"SWITCHBOARD_PORT": str(chosen)})
            url = f"http://127.0.0.1:{chosen}"
            try:
                self.wait_ready(url, process)
            except PortTaken:
                self.stop(process, signal.SIGKILL)
                if port:
                    raise
                continue
            return process, url
        raise RuntimeError(f"no free port held for the API after 3 tries:\n{self.tail()}")

    def worker(self, name: str = "worker", **settings: str) -> subprocess.Popen[bytes]:
        """A worker process; `settings` are SWITCHBOARD_* values of its own (without the prefix)."""
        return self._spawn("worker", name, {f"SWITCHBOARD_{key.upper()}": value for key, value in settings.items()})

    def wait_ready(self, url: str, process: subprocess.Popen[bytes], wait_s: float = 20) -> None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{url} exited at start:\n{self.tail()}")
            if _BIND_REFUSED in self._log(process):
                raise PortTaken(url)
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=1) as answer:  # noqa: S310 (a local URL)
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{url} was not ready within {wait_s} s:\n{self.tail()}")

    def stop(self, process: subprocess.Popen[bytes], sig: int | None = signal.SIGTERM) -> None:
        """Signal the process (`sig`; None when it was signalled already) and wait for it, killing it
        past 20 s."""
        if process.poll() is None:
            if sig is not None:
                process.send_signal(sig)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process in self.running:
            self.running.remove(process)

    def stop_all(self) -> None:
        # Every process is told at once and then waited for: each takes its own time to drain, and in turn
        # those times would add up.
        running = list(self.running)
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in running:
            self.stop(process, None)

    def tail(self, lines: int = 40) -> str:
        return "\n".join(
            f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
            for log in sorted(self.logs.glob("*.log"))
        )
