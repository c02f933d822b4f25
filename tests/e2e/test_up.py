"""`switchboard up` owns its children: every stopping signal stops them all, a killed `up` leaves nothing
running, and a second `up` on the same data directory refuses without touching it. A busy port stops it
at once, naming the port and its setting; a busy default metrics port is swapped for a free one."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from broker.transport.embedded import free_port
from tests.e2e.test_tool_server import alive, children, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]


class Up:
    """One `switchboard up` on its own data directory and port, its output kept in a file."""

    def __init__(self, data_dir: Path, port: int, *, default_metrics_port: bool = False, **settings: str) -> None:
        self.data_dir = data_dir
        self.port = port
        self.output = data_dir.parent / f"up-{port}-{time.monotonic_ns()}.log"
        env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(data_dir), "SWITCHBOARD_PORT": str(port)}
        for name in ("SWITCHBOARD_REDIS_URL", "SWITCHBOARD_BOOTSTRAP_API_KEY", "SWITCHBOARD_WORKER_METRICS_PORT"):
            env.pop(name, None)
        if not default_metrics_port:
            # The default (9101) is one port for the whole machine: only the test about it may use it.
            env["SWITCHBOARD_WORKER_METRICS_PORT"] = str(free_port())
        env |= settings
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


@contextlib.contextmanager
def running_up(tmp_path: Path, *, default_metrics_port: bool = False, **settings: str) -> Iterator[Up]:
    """A `switchboard up` (`settings`: more of its environment), up; everything it started is gone after."""
    running = Up(tmp_path / "data", free_port(), default_metrics_port=default_metrics_port, **settings)
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


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    with running_up(tmp_path) as running:
        yield running


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


def test_up_prints_the_landing_link_with_the_demo_console_and_api_lines(up: Up) -> None:
    banner = up.text.split("Switchboard is up.", 1)[1]
    found = dict(re.findall(r"^  ([A-Za-z ]+):\s+(\S+)", banner, re.MULTILINE))
    base = f"http://127.0.0.1:{up.port}"
    key = found["API key"]
    assert found["Start here"] == f"{base}/", banner
    assert found["Demo"] == f"{base}/demo#key={key}"
    assert found["Console"] == f"{base}/console#key={key}"
    assert found["API"] == base
    # The landing link is first, and it is the page that leads to the others.
    assert next(iter(found)) == "Start here", banner
    landing = httpx.get(found["Start here"], timeout=10)
    assert landing.status_code == 200
    for page in ("/demo", "/console", "/docs"):
        assert f'href="{page}"' in landing.text


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


@contextlib.contextmanager
def held(port: int = 0) -> Iterator[int]:
    """A port held by a listening socket for the block (`port`, or any free one). A named port someone
    else holds is waited for: they may let go of it at any moment, so it would not stay busy."""
    with socket.socket() as sock:
        deadline = time.monotonic() + 60
        while True:
            try:
                sock.bind(("127.0.0.1", port))
                break
            except OSError:
                assert port, "no free port to hold"
                assert time.monotonic() < deadline, f"port {port} never came free"
                time.sleep(0.1)
        sock.listen()
        yield int(sock.getsockname()[1])


def refused_at_once(up: Up) -> str:
    """What an `up` expected to stop before starting anything printed; it stopped within 3 s."""
    started = time.monotonic()
    code = up.process.wait(timeout=30)
    elapsed = time.monotonic() - started
    assert code == 1, up.text
    assert elapsed < 3, (elapsed, up.text)
    assert "Switchboard is up." not in up.text
    assert "Traceback" not in up.text
    return up.text


def test_a_busy_port_stops_up_within_3_s_naming_the_port_and_its_setting(tmp_path: Path) -> None:
    with held() as port:
        text = refused_at_once(Up(tmp_path / "data", port))
    assert f"port {port} is in use (SWITCHBOARD_PORT)" in text, text
    # A free port to try instead, as a command line.
    assert re.search(r"e\.g\. SWITCHBOARD_PORT=\d+ switchboard up", text), text
    # Nothing was started: no Redis data.
    assert not (tmp_path / "data" / "redis").exists()


def test_a_second_up_on_the_same_port_never_says_it_is_up(up: Up, tmp_path: Path) -> None:
    second = Up(tmp_path / "other", up.port)
    text = refused_at_once(second)
    assert f"port {up.port} is in use (SWITCHBOARD_PORT)" in text, text
    # The first is untouched and still serves.
    assert httpx.get(f"http://127.0.0.1:{up.port}/readyz", timeout=10).status_code == 200


def test_a_busy_metrics_port_the_user_named_stops_up_naming_its_setting(tmp_path: Path) -> None:
    with held() as port:
        text = refused_at_once(Up(tmp_path / "data", free_port(), SWITCHBOARD_WORKER_METRICS_PORT=str(port)))
    assert f"port {port} is in use (SWITCHBOARD_WORKER_METRICS_PORT)" in text, text


def test_a_busy_default_metrics_port_is_swapped_for_a_free_one_with_one_line_and_no_error(tmp_path: Path) -> None:
    # 9101 is the default: held here, or by another `up` on this machine, which is the case at hand.
    with held(9101), running_up(tmp_path, default_metrics_port=True) as up:
        [moved] = re.findall(r"port 9101 \(SWITCHBOARD_WORKER_METRICS_PORT's default\) is in use, "
                             r"so the worker serves /metrics on port (\d+)", up.text)  # fmt: skip

        def served() -> bool:
            try:
                return "switchboard_worker_jobs_running" in httpx.get(f"http://127.0.0.1:{moved}/metrics").text
            except httpx.HTTPError:
                return False

        wait_until("the worker's metrics on the port it was given", served, 10)
        assert "ERROR" not in up.text, up.text


def session_new(up: Up, cwd: Path, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "SWITCHBOARD_PORT": str(up.port), **env}
    for name in ("SWITCHBOARD_BOOTSTRAP_API_KEY", "SWITCHBOARD_API_KEY"):
        if name not in env:
            environment.pop(name, None)
    command = [sys.executable, "-m", "switchboard", "session", "new", *extra]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=60)


def test_session_new_prints_a_working_session_from_any_directory(up: Up, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # From another folder, the key is found through the data directory `up` printed.
    first = session_new(up, elsewhere, "--json", SWITCHBOARD_DATA_DIR=str(up.data_dir))
    assert first.returncode == 0, first.stderr
    made = json.loads(first.stdout)
    assert made["agent_name"] == "scripted"
    assert made["created_agent"] is True
    headers = {"Authorization": f"Bearer {made['session_token']}"}
    answer = httpx.get(f"http://127.0.0.1:{up.port}/v1/sessions/{made['session_id']}", headers=headers)
    assert answer.status_code == 200, answer.text
    # Or through SWITCHBOARD_API_KEY; the agent is found by name this time.
    key = (up.data_dir / "dev-api-key").read_text().strip()
    second = session_new(up, elsewhere, SWITCHBOARD_API_KEY=key)
    assert second.returncode == 0, second.stderr
    assert f"agent:         scripted ({made['agent_id']})" in second.stdout
    assert "session token: swb_st_" in second.stdout
    # Without a key anywhere it says where it looked.
    lost = session_new(up, elsewhere, SWITCHBOARD_DATA_DIR=str(elsewhere / "nowhere"))
    assert lost.returncode == 1
    assert "SWITCHBOARD_API_KEY" in lost.stderr


def test_up_hands_the_providers_key_to_the_worker_alone_and_the_api_lists_its_provider(tmp_path: Path) -> None:
    secret = "sk-up-" + "k" * 40
    with running_up(tmp_path, SWITCHBOARD_OPENAI_API_KEY=secret) as up:
        environments = {}
        for pid in children(up.process.pid):
            role = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[-2].decode()
            environments[role] = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert set(environments) >= {"api", "worker"}
        assert f"SWITCHBOARD_OPENAI_API_KEY={secret}".encode() in environments["worker"]
        assert not [line for line in environments["api"] if secret.encode() in line]
        assert not [line for line in environments["worker"] if line.startswith(b"SWITCHBOARD_BOOTSTRAP_API_KEY=")]
        # The API, which never read the key, lists the provider the worker holding it offers.
        key = (up.data_dir / "dev-api-key").read_text().strip()

        def openai_listed() -> bool:
            answer = httpx.get(
                f"http://127.0.0.1:{up.port}/v1/model-providers", headers={"Authorization": f"Bearer {key}"}
            )
            return any(p["display_name"] == "OpenAI" for p in answer.json()["items"])

        wait_until("the OpenAI platform provider is listed", openai_listed, 10)
