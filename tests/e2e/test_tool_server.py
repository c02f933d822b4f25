"""`switchboard tools serve` as real processes: a pool of members, one killed mid-work, a clean stop."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import httpx
import pytest

from tests.api_client import whole_log
from tests.e2e.served import Served, api_and_worker, scripted_session

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

TOOLS_MODULE = '''
import os
import time


def work(n: int, seconds: float = 0.4) -> str:
    """Work on item n for a moment."""
    time.sleep(seconds)
    return f"item {n} by {os.getpid()}"


TOOLS = [work]
'''


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (zombies left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def wait_until(what: str, done: Callable[[], Any], timeout: float = 20) -> Any:
    """What `done` returned once it was true (it is asked every 50 ms)."""
    deadline = time.monotonic() + timeout
    while not (found := done()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[Served]:
    """An API and a worker whose result deadline is short (3 s) and claim interval 0.5 s."""
    settings = {"ack_timeout_s": "20", "result_timeout_s": "3", "pool_claim_s": "0.5"}
    with api_and_worker(redis_url, tmp_path / "logs", **settings) as running:
        yield running


async def _log(url: str, sid: str, token: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
        return await whole_log(lambda params: http.get(f"/v1/sessions/{sid}/events", params=params))


def tools_serve(
    where: Path,
    url: str,
    sid: str,
    token: str,
    *,
    processes: int,
    concurrency: int = 1,
    module: str = TOOLS_MODULE,
    extra: tuple[str, ...] = (),
) -> tuple[subprocess.Popen[bytes], BinaryIO]:
    """`switchboard tools serve pooltools:TOOLS` in `where`, `concurrency` calls at a time per member (one
    unless told); its output goes to serve.log there."""
    (where / "pooltools.py").write_text(module)
    command = [sys.executable, "-m", "switchboard", "tools", "serve", "pooltools:TOOLS", "--url", url]
    command += ["--session", sid, "--name", "pool", "--processes", str(processes)]
    command += ["--concurrency", str(concurrency), "--drain", "10", *extra]
    log = (where / "serve.log").open("wb")
    server = subprocess.Popen(
        command,
        cwd=where,
        env={**os.environ, "SWITCHBOARD_SESSION_TOKEN": token},
        stdout=log,
        stderr=log,
        # A process group of its own, as a terminal gives a command, for stop_serving's Ctrl-C.
        start_new_session=True,
    )
    return server, log


def stop_serving(server: subprocess.Popen[bytes], log: BinaryIO, where: Path, sig: int = signal.SIGTERM) -> None:
    """Signal the tool server (SIGTERM unless told); it must drain and exit 0 within 30 s. SIGINT goes to
    its whole process group, members included, as a terminal's Ctrl-C does."""
    if sig == signal.SIGINT:
        os.killpg(server.pid, sig)
    else:
        server.send_signal(sig)
    code = server.wait(timeout=30)
    log.close()
    assert code == 0, (where / "serve.log").read_text()


def served_lines(where: Path) -> list[str]:
    return (where / "serve.log").read_text(errors="replace").splitlines()


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def test_a_pool_of_processes_serves_every_call_once_through_a_member_killed_mid_work(
    served: Served, tmp_path: Path
) -> None:
    url, key = served.url, served.key
    sid, token = asyncio.run(scripted_session(url, key, "pooled"))
    server, log = tools_serve(tmp_path, url, sid, token, processes=3)
    try:
        wait_until("three members", lambda: len(children(server.pid)) == 3)
        wait_until("the registration", lambda: bool(_of(asyncio.run(_log(url, sid, token)), "client_registered")))
        lines = "\n".join(f'/call client__pool__work {{"n": {i}}}' for i in range(12))
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
            assert http.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": lines}).status_code == 200
        # Every member is busy with a call it acked, and holds one more it has not: kill one of them.
        wait_until("three acks", lambda: len(_of(asyncio.run(_log(url, sid, token)), "client_tool_acked")) >= 3)
        victim = children(server.pid)[0]
        os.kill(victim, signal.SIGKILL)
        wait_until("the run to end", lambda: bool(_of(asyncio.run(_log(url, sid, token)), "run_completed")), 60)
        # The supervisor starts a member in the killed one's place.
        wait_until(
            "the pool back at three", lambda: len(children(server.pid)) == 3 and victim not in children(server.pid)
        )
    finally:
        stop_serving(server, log, tmp_path)
    events = asyncio.run(_log(url, sid, token))
    dispatched = [e["call_id"] for e in _of(events, "client_tool_dispatched")]
    results = {e["call_id"]: e for e in _of(events, "tool_result")}
    assert len(dispatched) == len(set(dispatched)) == 12
    assert sorted(results) == sorted(dispatched)  # one result each
    assert len(_of(events, "tool_result")) == 12
    failed = _of(events, "client_tool_failed")
    # Only a call the killed member had acked (it owned it) can fail, and at most one: its concurrency.
    assert len(failed) <= 1
    assert all(f["reason"] == "result_timeout" for f in failed)
    answered = [r for r in results.values() if not r["is_error"]]
    assert len(answered) == 12 - len(failed)
    pids = {r["content"][0]["data"]["text"].rsplit(" ", 1)[1] for r in answered}
    assert len(pids) >= 2, pids  # the work was shared
    # An answered call has one line, from the member that ran it; the call the killed member held has none
    # (nor, if the kill fell between an answer and its line, that one).
    call_lines = [line for line in served_lines(tmp_path) if ": call work: " in line]
    assert all(re.match(r"switchboard tools serve: member [123]: call work: ok in ", line) for line in call_lines)
    said_of = [line.rsplit("(call ", 1)[1].rstrip(")") for line in call_lines]
    assert len(said_of) == len(set(said_of)) >= len(answered) - 1, call_lines
    assert set(said_of) <= {r["call_id"] for r in answered}
    # Stopping drained the members and left the registration.
    left = _of(events, "client_left")
    assert [e["reason"] for e in left] == ["departed"]


@pytest.mark.parametrize(
    "stopping", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"]
)
def test_stopping_the_server_finishes_the_call_in_hand_then_leaves(
    served: Served, tmp_path: Path, stopping: signal.Signals
) -> None:
    url, key = served.url, served.key
    sid, token = asyncio.run(scripted_session(url, key, "draining"))
    server, log = tools_serve(tmp_path, url, sid, token, processes=1)
    try:
        wait_until("the registration", lambda: bool(_of(asyncio.run(_log(url, sid, token)), "client_registered")))
        wait_until("a member", lambda: len(children(server.pid)) == 1)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
            text = '/call client__pool__work {"n": 1, "seconds": 2}'
            assert http.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": text}).status_code == 200
        wait_until("the ack", lambda: bool(_of(asyncio.run(_log(url, sid, token)), "client_tool_acked")))
    finally:
        stop_serving(server, log, tmp_path, stopping)
    events = asyncio.run(_log(url, sid, token))
    kinds = [e["type"] for e in events]
    [result] = _of(events, "tool_result")
    assert not result["is_error"], result
    assert result["content"][0]["data"]["text"].startswith("item 1 by ")
    # The result went in before the registration left; nothing failed.
    assert kinds.index("tool_result") < kinds.index("client_left")
    assert "client_tool_failed" not in kinds
    # It said that it was stopping, the call's line, and what it did as it left: in that order, last.
    [left] = _of(events, "client_left")
    lines = served_lines(tmp_path)
    assert "Traceback" not in "\n".join(lines)
    said = [line.split(": ", 1)[1] for line in lines]
    stop_line = f"{stopping.name}: stopping; the calls in hand finish first (up to 10 s)"
    call_line = next(line for line in said if line.startswith("call work: "))
    assert re.fullmatch(rf"call work: ok in \d+\.\d\d s \(call {result['call_id']}\)", call_line), call_line
    assert said[-1] == f"stopped: drained 1 call, left the registration {left['client_id']}", lines
    assert said.index(stop_line) < said.index(call_line) < len(said) - 1, lines
