"""`switchboard up` owns its children: every stopping signal stops them all, a killed `up` leaves nothing
running, and a second `up` on the same data directory refuses without touching it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.embedded import free_port
from tests.e2e.test_tool_server import children, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]


class Up:
    """One `switchboard up` on its own data directory and port, its output kept in a file."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self.output = data_dir.parent / f"up-{port}-{time.monotonic_ns()}.log"
        env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(data_dir), "SWITCHBOARD_PORT": str(port)}
        for name in ("SWITCHBOARD_REDIS_URL", "SWITCHBOARD_BOOTSTRAP_API_KEY"):
            env.pop(name, None)
        with self.output.open("wb") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "switchboard", "up"], env=env, stdout=sink, stderr=subprocess.STDOUT
            )

    @property
    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_up(self) -> None:
        wait_until(
            "Switchboard is up", lambda: "Switchboard is up." in self.text or self.process.poll() is not None, 60
        )
        assert "Switchboard is up." in self.text, self.text

    def descendants(self) -> list[int]:
        found, frontier = [], [self.process.pid]
        while frontier:
            below = [child for pid in frontier for child in children(pid)]
            found += below
            frontier = below
        return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    running = Up(tmp_path / "data", free_port())
    try:
        running.wait_up()
        yield running
    finally:
        leftovers = running.descendants()
        if running.process.poll() is None:
            running.process.kill()
        running.process.wait()
        for pid in leftovers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("stopping", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopping_signal_stops_every_child_with_a_line_each_and_no_traceback(up: Up, stopping: int) -> None:
    owned = up.descendants()
    assert len(owned) >= 3, owned  # Redis, the API, the worker (and whatever they start)
    up.process.send_signal(stopping)
    assert up.process.wait(timeout=60) == 0
    wait_until("every child to exit", lambda: not any(alive(pid) for pid in owned), 10)
    text = up.text.split("Switchboard is up.", 1)[1]
    assert "Traceback" not in text, text
    for name in ("api", "worker", "redis"):
        assert f"switchboard up: {name} stopped (pid" in text, text


def test_a_killed_up_leaves_nothing_running(up: Up) -> None:
    owned = up.descendants()
    up.process.kill()
    up.process.wait()
    wait_until("every child to die with its parent", lambda: not any(alive(pid) for pid in owned), 15)


def test_a_second_up_on_the_same_data_directory_refuses_at_once(up: Up, tmp_path: Path) -> None:
    before = sorted(path.name for path in up.data_dir.iterdir())
    second = Up(up.data_dir, free_port())
    assert second.process.wait(timeout=20) == 1
    assert f"pid {up.process.pid}" in second.text, second.text
    assert f"http://127.0.0.1:{up.port}" in second.text
    assert "Switchboard is up." not in second.text
    assert sorted(path.name for path in up.data_dir.iterdir()) == before
    # The first is untouched and still serves.
    assert up.process.poll() is None
    assert len(up.descendants()) >= 3
