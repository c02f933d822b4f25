"""What `switchboard tools serve` says, read from real processes: the names the model sees at start, one
line per call (tool, outcome, duration), the line it leaves with, the same facts as JSON lines, and the
errors of a missing token, a bad option, an unreachable API and an unknown registration."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from broker.transport.embedded import free_port
from tests.e2e.served import Served, api_and_worker, scripted_session
from tests.e2e.test_tool_server import (
    TOOLS_MODULE,
    _log,
    _of,
    alive,
    children,
    served_lines,
    stop_serving,
    tools_serve,
    wait_until,
)
from workers.models.aliases import shorten

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

LONG_NAME = "summarise_every_invoice_of_the_quarter_for_the_board"
# TOOLS_MODULE and three more: one that raises, one that waits (async, so a cancel stops it at once), and one
# whose model-visible name is past the providers' 64 characters.
NAMED_MODULE = TOOLS_MODULE.replace(
    "TOOLS = [work]",
    f'''import asyncio


def fail(reason: str) -> str:
    """Fail with the reason given."""
    raise ValueError(reason)


async def wait(seconds: float) -> str:
    """Wait a while."""
    await asyncio.sleep(seconds)
    return "waited"


def {LONG_NAME}(quarter: int) -> str:
    """A tool with a long name."""
    return f"quarter {{quarter}}"


TOOLS = [work, fail, wait, {LONG_NAME}]
''',
)


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[Served]:
    with api_and_worker(redis_url, tmp_path / "logs") as running:
        yield running


def _post_input(url: str, sid: str, token: str, *lines: str) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
        answer = http.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": "\n".join(lines)})
        assert answer.status_code == 200, answer.text


def _said(where: Path) -> list[str]:
    """What the server said, its lines without their `switchboard tools serve: ` prefix."""
    lines = served_lines(where)
    assert all(line.startswith("switchboard tools serve: ") for line in lines), lines
    return [line.removeprefix("switchboard tools serve: ") for line in lines]


def test_the_start_lines_name_what_the_model_sees_and_each_call_gets_one_line(served: Served, tmp_path: Path) -> None:
    url, key = served.url, served.key
    sid, token = asyncio.run(scripted_session(url, key, "named"))
    server, log = tools_serve(tmp_path, url, sid, token, processes=1, concurrency=3, module=NAMED_MODULE)
    try:
        wait_until("the start lines", lambda: any("Ctrl-C or SIGTERM stops" in line for line in served_lines(tmp_path)))
        calls = (
            '/call client__pool__work {"n": 1, "seconds": 0.3}',
            '/call client__pool__fail {"reason": "no such invoice"}',
        )
        _post_input(url, sid, token, *calls, '/call client__pool__wait {"seconds": 60}')
        wait_until("three acks", lambda: len(_of(asyncio.run(_log(url, sid, token)), "client_tool_acked")) == 3)
        events = asyncio.run(_log(url, sid, token))
        waiting = next(e["call_id"] for e in _of(events, "client_tool_dispatched") if e["tool"] == "wait")
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
            assert http.post(f"/v1/sessions/{sid}/calls/{waiting}/cancel", json={}).status_code == 200
        wait_until("the run to end", lambda: bool(_of(asyncio.run(_log(url, sid, token)), "run_completed")), 30)
    finally:
        stop_serving(server, log, tmp_path, signal.SIGINT)
    events = asyncio.run(_log(url, sid, token))
    [registered] = _of(events, "client_registered")
    said = _said(tmp_path)
    assert said[0].startswith(f'registered as "pool" (client {registered["client_id"]}) on session {sid}, ttl 30 s')
    for short in ("work", "fail", "wait"):
        assert f"serving {short} as client__pool__{short}" in said
    offered = f"client__pool__{LONG_NAME}"
    alias = shorten(offered)  # the providers' own aliasing, so the line names what they are sent
    assert len(offered) > 64 >= len(alias)
    assert (
        f"serving {LONG_NAME} as {offered}, which the model sees as {alias} (names past 64 characters are shortened)"
    ) in said
    # One line per call, naming the tool, what became of it and how long it took.
    expected = {
        "work": r"call work: ok in (?P<s>\d+\.\d\d) s \(call {id}\)",
        "fail": r"call fail: error in (?P<s>\d+\.\d\d) s \(call {id}\): ValueError: no such invoice",
        "wait": r"call wait: cancelled after (?P<s>\d+\.\d\d) s \(call {id}\): the call failed while it ran",
    }
    for dispatched in _of(events, "client_tool_dispatched"):
        [line] = [line for line in said if f"(call {dispatched['call_id']})" in line]
        found = re.fullmatch(expected[dispatched["tool"]].format(id=dispatched["call_id"]), line)
        assert found, line
        assert float(found["s"]) >= (0.3 if dispatched["tool"] == "work" else 0), line
    assert said[-1] == f"stopped: drained 0 calls, left the registration {registered['client_id']}", said


def test_json_lines_carry_the_same_facts_from_every_member_of_a_pool(served: Served, tmp_path: Path) -> None:
    url, key = served.url, served.key
    sid, token = asyncio.run(scripted_session(url, key, "json"))
    json_lines = ("--log-format", "json")
    server, log = tools_serve(tmp_path, url, sid, token, processes=2, module=NAMED_MODULE, extra=json_lines)
    try:
        wait_until("the start lines", lambda: '"event":"serving"' in (tmp_path / "serve.log").read_text())
        works = [f'/call client__pool__work {{"n": {n}, "seconds": 0.2}}' for n in range(4)]
        _post_input(url, sid, token, *works, '/call client__pool__fail {"reason": "no"}')
        wait_until("the run to end", lambda: bool(_of(asyncio.run(_log(url, sid, token)), "run_completed")), 30)
    finally:
        stop_serving(server, log, tmp_path)
    events = asyncio.run(_log(url, sid, token))
    records = [json.loads(line) for line in served_lines(tmp_path)]
    assert all({"ts", "level", "logger", "msg"} <= set(record) for record in records), records
    named = {record["tool"]: record for record in records if record.get("event") == "tool"}
    assert named["work"]["offered"] == named["work"]["model_name"] == "client__pool__work"
    assert named[LONG_NAME]["model_name"] == shorten(f"client__pool__{LONG_NAME}") != named[LONG_NAME]["offered"]
    calls = {record["call_id"]: record for record in records if record.get("event") == "call"}
    dispatched = _of(events, "client_tool_dispatched")
    assert len(calls) == len([r for r in records if r.get("event") == "call"]) == len(dispatched) == 5
    for event in dispatched:
        record = calls[event["call_id"]]
        assert record["tool"] == event["tool"]
        assert record["outcome"] == ("ok" if event["tool"] == "work" else "error"), record
        assert record["duration_ms"] >= (200 if event["tool"] == "work" else 0), record
        # In a pool, each call's line names the member that ran it.
        assert record["member"] in (1, 2), record
        assert record["msg"].startswith(f"call {event['tool']}: {record['outcome']} in ")
    assert next(r for r in records if r.get("event") == "stopping")["signal"] == "SIGTERM"
    [registered] = _of(events, "client_registered")
    stopped = records[-1]
    assert stopped["event"] == "stopped", records
    assert (stopped["drained"], stopped["left"], stopped["client_id"]) == (0, True, registered["client_id"])


def _serve_command(where: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """`switchboard tools serve pooltools:TOOLS ARGS...` in `where`, with `token` (or none) in its environment."""
    (where / "pooltools.py").write_text(TOOLS_MODULE)
    env = {name: value for name, value in os.environ.items() if name != "SWITCHBOARD_SESSION_TOKEN"}
    env |= {} if token is None else {"SWITCHBOARD_SESSION_TOKEN": token}
    command = [sys.executable, "-m", "switchboard", "tools", "serve", "pooltools:TOOLS", *args]
    return subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=60)


def test_without_a_token_the_error_names_both_ways_and_the_help_warns_of_ps(tmp_path: Path) -> None:
    refused = _serve_command(tmp_path, "--session", "s")
    assert refused.returncode == 1
    assert "$SWITCHBOARD_SESSION_TOKEN" in refused.stderr, refused.stderr
    assert "--token" in refused.stderr
    assert "`ps`" in refused.stderr
    helped = _serve_command(tmp_path, "--help")
    assert helped.returncode == 0
    words = " ".join(helped.stdout.split())
    assert "other users of this machine can read it through `ps`" in words, words
    assert "$SWITCHBOARD_SESSION_TOKEN" in words


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--log-format", "xml"), "argument --log-format: invalid choice: 'xml' (choose from"),
        (("--processes", "0"), "argument --processes: 0 is less than 1"),
        (("--concurrency", "many"), "argument --concurrency: 'many' is not a number"),
        (("--drain", "-1"), "argument --drain: -1 is less than 0"),
    ],
    ids=["log-format", "processes", "concurrency", "drain"],
)
def test_a_bad_option_is_the_usual_usage_error(tmp_path: Path, args: tuple[str, ...], complaint: str) -> None:
    refused = _serve_command(tmp_path, "--session", "s", *args)
    assert refused.returncode == 2
    assert refused.stderr.startswith("usage: switchboard tools serve"), refused.stderr
    assert complaint in refused.stderr, refused.stderr


def test_an_api_it_cannot_reach_is_one_line_naming_the_address(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    refused = _serve_command(tmp_path, "--session", "s", "--url", nowhere, token="swb_st_x")
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"switchboard tools serve: cannot reach the API at {nowhere}: "), refused.stderr
    assert "Traceback" not in refused.stderr


def test_joining_a_registration_names_its_tools_and_keeps_it_and_an_unknown_one_is_refused(
    served: Served, tmp_path: Path
) -> None:
    url, key = served.url, served.key
    sid, token = asyncio.run(scripted_session(url, key, "joined"))
    owner_dir, joiner_dir = tmp_path / "owner", tmp_path / "joiner"
    owner_dir.mkdir()
    joiner_dir.mkdir()
    owner, owner_log = tools_serve(owner_dir, url, sid, token, processes=1)
    try:
        wait_until("the registration", lambda: bool(_of(asyncio.run(_log(url, sid, token)), "client_registered")))
        [registered] = _of(asyncio.run(_log(url, sid, token)), "client_registered")
        client_id = registered["client_id"]
        joiner, joiner_log = tools_serve(joiner_dir, url, sid, token, processes=1, extra=("--client-id", client_id))
        wait_until("the joiner's start lines", lambda: any("stops" in line for line in served_lines(joiner_dir)))
        stop_serving(joiner, joiner_log, joiner_dir)
        said = _said(joiner_dir)
        assert said[0] == f'joined "pool" (client {client_id}) on session {sid}; it is not left on stop', said
        assert "serving work as client__pool__work" in said
        assert said[-1] == f"stopped: drained 0 calls, kept the registration {client_id} (joined with --client-id)"
        unknown = str(uuid.uuid4())
        refused, refused_log = tools_serve(joiner_dir, url, sid, token, processes=1, extra=("--client-id", unknown))
        assert refused.wait(timeout=30) == 1
        refused_log.close()
        assert served_lines(joiner_dir)[-1] == (
            f"switchboard tools serve: no active registration {unknown} on session {sid}"
        )
    finally:
        stop_serving(owner, owner_log, owner_dir)
    # The joiner left the owner's registration in place; the owner left it.
    assert [e["reason"] for e in _of(asyncio.run(_log(url, sid, token)), "client_left")] == ["departed"]


def test_a_server_without_a_ttl_kills_a_member_past_the_drain_time_and_leaves_once(
    served: Served, tmp_path: Path
) -> None:
    url, key = served.url, served.key
    sid, token = asyncio.run(scripted_session(url, key, "never"))
    server, log = tools_serve(tmp_path, url, sid, token, processes=1, extra=("--ttl", "0", "--drain", "1"))
    try:
        wait_until("the start lines", lambda: any("stops" in line for line in served_lines(tmp_path)))
        _post_input(url, sid, token, '/call client__pool__work {"n": 1, "seconds": 20}')
        wait_until("the ack", lambda: bool(_of(asyncio.run(_log(url, sid, token)), "client_tool_acked")))
    finally:
        stop_serving(server, log, tmp_path)
    events = asyncio.run(_log(url, sid, token))
    # Its stop is not a lapse: nothing registers again, and the one registration is left.
    [registered] = _of(events, "client_registered")
    assert [e["client_id"] for e in _of(events, "client_left")] == [registered["client_id"]]
    said = _said(tmp_path)
    assert said[0].endswith(f"on session {sid}, no ttl"), said
    assert "warning: member 1 did not drain in 1 s; killing it" in said
    assert not any(line.startswith("call work: ") for line in said), said
    assert said[-1] == (
        f"stopped: drained 0 calls, killed 1 member still running after 1 s, "
        f"left the registration {registered['client_id']}"
    )


def test_a_killed_server_leaves_no_member_serving(served: Served, tmp_path: Path) -> None:
    url, key = served.url, served.key
    sid, token = asyncio.run(scripted_session(url, key, "orphans"))
    server, log = tools_serve(tmp_path, url, sid, token, processes=2)
    members: list[int] = []
    try:
        wait_until("two members", lambda: len(children(server.pid)) == 2)
        members = children(server.pid)
        server.kill()
        server.wait()
        # Nothing tells a member its parent died: it looks every second, then drains and stops.
        wait_until("the members to stop", lambda: not any(alive(pid) for pid in members), 15)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
        for pid in members:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    said = _said(tmp_path)
    for index in (1, 2):
        assert (
            f"member {index}: warning: the supervisor (pid {server.pid}) is gone; this member drains and stops" in said
        )


def _as_from_a_terminal() -> None:
    # A shell starts a background job with SIGINT ignored, and an ignored signal stays ignored across exec
    # (Python then installs no KeyboardInterrupt): the CLI must see a Ctrl-C as it would from a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_ctrl_c_while_the_module_loads_is_one_line(tmp_path: Path) -> None:
    # It says when the CLI has reached it, then takes its time.
    (tmp_path / "slowtools.py").write_text(
        "import pathlib\nimport time\n\npathlib.Path('loading').touch()\ntime.sleep(60)\n"
    )
    env = {**os.environ, "SWITCHBOARD_SESSION_TOKEN": "swb_st_x"}
    command = [sys.executable, "-m", "switchboard", "tools", "serve", "slowtools:TOOLS", "--session", "s"]
    with subprocess.Popen(
        command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=_as_from_a_terminal
    ) as server:
        try:
            wait_until("the module to be loading", (tmp_path / "loading").exists, 30)
            server.send_signal(signal.SIGINT)
            try:
                _, stderr = server.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                status = Path(f"/proc/{server.pid}/status").read_text()
                masks = [line for line in status.splitlines() if line.startswith(("State", "SigBlk", "SigIgn"))]
                raise AssertionError(f"no exit within 30 s of SIGINT: {masks}") from None
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    assert server.returncode == 130
    assert stderr == "switchboard tools serve: interrupted\n"


def test_a_result_the_api_refuses_is_the_calls_one_line_as_a_warning(redis_url: str, tmp_path: Path) -> None:
    big = TOOLS_MODULE.replace("TOOLS = [work]", 'def big() -> str:\n    return "x" * 100_000\n\n\nTOOLS = [big]\n')
    with api_and_worker(redis_url, tmp_path / "logs", max_result_body_bytes="65536") as small:
        sid, token = asyncio.run(scripted_session(small.url, small.key, "refused"))
        server, log = tools_serve(tmp_path, small.url, sid, token, processes=1, module=big)
        try:
            wait_until("the start lines", lambda: any("stops" in line for line in served_lines(tmp_path)))
            _post_input(small.url, sid, token, "/call client__pool__big")
            wait_until("the call's line", lambda: any("call big: " in line for line in served_lines(tmp_path)), 30)
        finally:
            stop_serving(server, log, tmp_path)
        [dispatched] = _of(asyncio.run(_log(small.url, sid, token)), "client_tool_dispatched")
    [line] = [line for line in _said(tmp_path) if line.startswith("warning: call big: ")]
    # The API answers 413 and closes the connection: the client reads the answer, or loses the connection.
    call = rf"after \d+\.\d\d s \(call {dispatched['call_id']}\)"
    refused = rf"refused {call}: the result was refused \(413\): .*SWITCHBOARD_MAX_RESULT_BODY_BYTES.*"
    lost = rf"undelivered {call}: the result could not be delivered: .*"
    assert re.fullmatch(rf"warning: call big: ({refused}|{lost})", line), line
