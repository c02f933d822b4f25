"""`switchboard tools mcp` as a real process bridging the MCP kit (tests/mcp_servers.py) to a session,
through the scripted model: the kit's tools registered with their schemas and annotations, results
(text, structured, images, errors), progress, a cancel reaching the server, approvals by annotations, a
changed tool list, a child that crashes and is started again, the stop and the HTTP transport (what it
refuses and leaves out: tests/e2e/test_tool_mcp_refusals.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api_client import ENDS, Event, of_type, whole_log
from tests.e2e.served import Served, api_and_worker, scripted_session
from tests.e2e.test_tool_server import alive, children, wait_until
from tests.mcp_servers import ERASE_HINTS, NOTES_ENV, PDF, PIXEL, WAV, Seen, in_thread, serving

pytestmark = [pytest.mark.processes, pytest.mark.xdist_group("tool_mcp")]

ROOT = Path(__file__).resolve().parents[2]
KIT = (sys.executable, "-m", "tests.mcp_servers")
PREFIX = "switchboard tools mcp: "
KIT_TOOLS = {"add", "picture", "rich", "slow", "fails", "hangs", "grow", "crash", "erase"}


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One API and one worker for the module's tests, each on a session of its own."""
    settings = {"ack_timeout_s": "20", "result_timeout_s": "30"}
    with api_and_worker(redis_url, tmp_path_factory.mktemp("logs"), **settings) as running:
        yield running


def texts(result: Event) -> list[str]:
    return [block["data"]["text"] for block in result["content"] if block["type"] == "text"]


@dataclass
class Bridged:
    """A running `switchboard tools mcp` on a session of its own; its output goes to bridge.log."""

    url: str
    key: str
    sid: str
    token: str
    where: Path
    process: subprocess.Popen[bytes]

    @property
    def notes(self) -> list[str]:
        path = self.where / "notes"
        return path.read_text().splitlines() if path.exists() else []

    def said(self) -> list[str]:
        """Its lines, without the `switchboard tools mcp: ` prefix."""
        lines = (self.where / "bridge.log").read_text(errors="replace").splitlines()
        return [line.removeprefix(PREFIX) for line in lines]

    def wait_said(self, what: str, timeout: float = 20) -> str:
        def found() -> str | None:
            return next((line for line in self.said() if what in line), None)

        line: str = wait_until(f"a line with {what!r} in {self.said()}", found, timeout)
        return line

    def http(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key or self.token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def events(self, include: str = "") -> list[Event]:
        async def read() -> list[Event]:
            headers = {"Authorization": f"Bearer {self.token}"}
            async with httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10) as http:
                extra = {"include": include} if include else {}
                path = f"/v1/sessions/{self.sid}/events"
                return await whole_log(lambda params: http.get(path, params={**params, **extra}))

        return asyncio.run(read())

    def send(self, *lines: str) -> str:
        """Post the lines as one input; its run's id."""
        with self.http() as http:
            answer = http.post(f"/v1/sessions/{self.sid}/events", json={"type": "input", "text": "\n".join(lines)})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["run_id"])

    def since(self, run_id: str, include: str = "") -> list[Event]:
        """The events from the run's start on (the session's runs go one at a time)."""
        events = self.events(include)
        return events[next((i for i, e in enumerate(events) if e.get("run_id") == run_id), len(events)) :]

    def run_of(self, run_id: str, include: str = "", timeout: float = 30) -> list[Event]:
        """The events of the run, once it has ended."""

        def ended() -> list[Event] | None:
            events = self.since(run_id, include)
            return events if any(e["type"] in ENDS and e.get("run_id") == run_id for e in events) else None

        events: list[Event] = wait_until(f"run {run_id} to end", ended, timeout)
        return events

    def ask(self, *lines: str, include: str = "") -> list[Event]:
        return self.run_of(self.send(*lines), include)

    def clients(self) -> list[dict[str, Any]]:
        with self.http() as http:
            answer = http.get(f"/v1/sessions/{self.sid}/clients")
        assert answer.status_code == 200, answer.text
        items: list[dict[str, Any]] = answer.json()["items"]
        return items

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal it (SIGINT to its process group, as a terminal's Ctrl-C); its exit code."""
        if sig == signal.SIGINT:
            os.killpg(self.process.pid, sig)
        else:
            self.process.send_signal(sig)
        return self.process.wait(timeout=30)


def final_message(events: list[Event]) -> str:
    message = of_type(events, "message_assistant")[-1]["message"]
    return str(message["content"][0]["data"]["text"])


@contextlib.contextmanager
def bridge(
    served: Served, where: Path, *args: str, server: tuple[str, ...] = KIT, ready: bool = True
) -> Iterator[Bridged]:
    """`switchboard tools mcp ARGS -- SERVER` on a new session (SERVER empty: ARGS name the server),
    started and ready unless told."""
    where.mkdir(parents=True, exist_ok=True)
    sid, token = asyncio.run(scripted_session(served.url, served.key, f"mcp-{uuid.uuid4().hex[:8]}"))
    command = [sys.executable, "-m", "switchboard", "tools", "mcp", "--url", served.url, "--session", sid, *args]
    command += ["--", *server] if server else []
    env = {**os.environ, "SWITCHBOARD_SESSION_TOKEN": token, NOTES_ENV: str(where / "notes")}
    with (where / "bridge.log").open("wb") as log:
        # A process group of its own, as a terminal gives a command, for a Ctrl-C to it alone.
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)
    running = Bridged(served.url, served.key, sid, token, where, process)
    try:
        if ready:
            running.wait_said("Ctrl-C or SIGTERM stops", 30)
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def kit(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridged]:
    """The kit over stdio behind one bridge, for the tests that leave its tools as they are."""
    with bridge(served, tmp_path_factory.mktemp("kit")) as running:
        yield running


def test_the_registration_lists_the_servers_tools_with_their_parameters_and_annotations(kit: Bridged) -> None:
    [client] = kit.clients()
    assert client["name"] == "mcp"
    tools = {tool["name"]: tool for tool in client["tools"]}
    assert set(tools) == KIT_TOOLS
    add = tools["add"]
    assert add["description"] == "Add two numbers."
    assert add["parameters"]["required"] == ["a", "b"]
    assert add["parameters"]["properties"]["a"]["type"] == "integer"
    assert "annotations" not in add
    assert tools["erase"]["annotations"] == ERASE_HINTS.model_dump(by_alias=True, exclude_none=True)
    assert tools["erase"]["annotations"]["destructiveHint"] is True
    said = kit.said()
    assert any(
        line.startswith("started the MCP server ") and line.endswith(f": {len(KIT_TOOLS)} tools") for line in said
    ), said
    assert any(line.startswith(f'registered as "mcp" (client {client["id"]}) on session {kit.sid}') for line in said)
    for name in KIT_TOOLS:
        assert f"serving {name} as client__mcp__{name}" in said


def test_a_text_result_with_its_structured_content(kit: Bridged) -> None:
    events = kit.ask('/call client__mcp__add {"a": 2, "b": 3}')
    [result] = of_type(events, "tool_result")
    assert result["is_error"] is False
    assert texts(result) == ["5", '{"result":5}']
    assert final_message(events).startswith("client__mcp__add: 5")
    line = kit.wait_said(f"(call {result['call_id']})")
    assert line.startswith("call add: ok in "), line


def test_an_image_result_is_an_image_block(kit: Bridged) -> None:
    events = kit.ask("/call client__mcp__picture")
    [result] = of_type(events, "tool_result")
    assert result["is_error"] is False
    assert texts(result) == ["a red pixel", "[image/png, 1 KB]"]
    [full] = [e for e in of_type(kit.events("images"), "tool_result") if e["call_id"] == result["call_id"]]
    assert full["content"][1] == {"type": "image", "data": {"media_type": "image/png", "data": PIXEL}}
    assert final_message(events).startswith("client__mcp__picture: a red pixel")


def test_audio_resources_links_and_structured_content_are_bridged_as_themselves(kit: Bridged) -> None:
    events = kit.ask("/call client__mcp__rich")
    [result] = of_type(events, "tool_result")
    assert result["is_error"] is False
    assert result["structured"] == {"kinds": 5}
    [full] = [e for e in of_type(kit.events("extensions"), "tool_result") if e["call_id"] == result["call_id"]]
    assert full["content"] == [
        {"type": "text", "data": {"text": "all kinds"}},
        {"type": "audio", "data": {"media_type": "audio/wav", "data": WAV}},
        {"type": "resource", "data": {"uri": "mem://notes/1", "media_type": "text/plain", "text": "the note"}},
        {"type": "resource", "data": {"uri": "file:///r.pdf", "media_type": "application/pdf", "blob": PDF}},
        {"type": "resource_link", "data": {"uri": "https://example.com/r", "name": "report", "description": "It"}},
        {"type": "text", "data": {"text": '{"kinds":5}'}},
    ]


def test_a_failing_tool_is_an_error_result(kit: Bridged) -> None:
    events = kit.ask("/call client__mcp__fails")
    [result] = of_type(events, "tool_result")
    assert result["is_error"] is True
    assert "the kit broke" in texts(result)[0]
    assert of_type(events, "run_completed")
    assert final_message(events).startswith("client__mcp__fails failed: ")
    line = kit.wait_said(f"(call {result['call_id']})")
    assert line.startswith("call fails: error in "), line
    assert "the kit broke" in line


def test_progress_becomes_the_calls_progress(kit: Bridged) -> None:
    run_id = kit.send('/call client__mcp__slow {"steps": 3}')
    events = kit.run_of(run_id, include="progress")
    [result] = of_type(events, "tool_result")
    assert texts(result)[0] == "3 steps done"
    progress = of_type(events, "client_tool_progress")
    assert progress, [e["type"] for e in events]
    assert {e["call_id"] for e in progress} == {result["call_id"]}
    assert progress[0]["message"].startswith("step ")
    assert all(0 < e["fraction"] <= 1 for e in progress)
    # Shown only to readers that ask.
    assert not of_type(kit.run_of(run_id), "client_tool_progress")


def test_a_cancelled_call_is_cancelled_at_the_server(kit: Bridged) -> None:
    run_id = kit.send("/call client__mcp__hangs")
    acked = wait_until("the ack", lambda: of_type(kit.since(run_id), "client_tool_acked"))
    call_id = acked[-1]["call_id"]
    wait_until("the kit to begin", lambda: "began hangs" in kit.notes)
    with kit.http() as http:
        assert http.post(f"/v1/sessions/{kit.sid}/calls/{call_id}/cancel", json={}).status_code == 200
    events = kit.run_of(run_id)
    [result] = of_type(events, "tool_result")
    assert result["is_error"] is True
    # The call's task cancelled, the mcp client sent notifications/cancelled and the kit's tool stopped.
    wait_until("the kit to see the cancel", lambda: "cancelled hangs" in kit.notes, 10)
    line = kit.wait_said(f"(call {call_id})")
    assert line.startswith("call hangs: cancelled after "), line
    assert line.endswith("the call failed while it ran"), line


def test_a_tool_whose_annotations_say_destructive_waits_for_approval(kit: Bridged) -> None:
    run_id = kit.send('/call client__mcp__erase {"note": "n1"}')
    [asked] = wait_until("the approval request", lambda: of_type(kit.since(run_id), "approval_requested"))
    assert asked["tool"] == "erase"
    with kit.http(kit.key) as admin:
        decided = admin.post(f"/v1/sessions/{kit.sid}/approvals/{asked['call_id']}", json={"decision": "allow"})
    assert decided.status_code == 200, decided.text
    [result] = of_type(kit.run_of(run_id), "tool_result")
    assert texts(result)[0] == "erased n1"


# The kit, saying a word on stderr first.
CHATTY_KIT = (
    sys.executable,
    "-c",
    "import runpy, sys; print('hello from the kit', file=sys.stderr, flush=True); "
    "runpy.run_module('tests.mcp_servers', run_name='__main__')",
)


def test_a_changed_tool_list_replaces_the_registrations_tools(served: Served, tmp_path: Path) -> None:
    with bridge(served, tmp_path, server=CHATTY_KIT) as grown:
        # The child's stderr comes through as lines of the bridge's own.
        assert "server: hello from the kit" in grown.said()
        before = grown.ask("/call client__mcp__extra")
        assert of_type(before, "tool_result")[0]["is_error"] is True
        grown.ask("/call client__mcp__grow")
        line = grown.wait_said("tools changed")
        assert line == "the MCP server's tools changed (added extra); the registration's tools are replaced", line
        assert "serving extra as client__mcp__extra" in grown.said()
        [client] = grown.clients()
        assert {tool["name"] for tool in client["tools"]} == {*KIT_TOOLS, "extra"}
        assert of_type(grown.events(), "client_tools_updated")
        after = grown.ask("/call client__mcp__extra")
        [result] = of_type(after, "tool_result")
        assert (result["is_error"], texts(result)[0]) == (False, "extra")


def test_a_child_that_crashes_fails_its_call_and_is_started_again(served: Served, tmp_path: Path) -> None:
    with bridge(served, tmp_path) as crashing:
        first = children(crashing.process.pid)
        events = crashing.ask("/call client__mcp__crash")
        [result] = of_type(events, "tool_result")
        assert result["is_error"] is True
        assert texts(result)[0] == "the MCP server exited while the call ran"
        assert "began crash" in crashing.notes
        crashing.wait_said("warning: the MCP server exited; starting it again in 0.5 s")
        crashing.wait_said(f"the MCP server is back ({len(KIT_TOOLS)} tools listed)")
        assert children(crashing.process.pid) != first
        after = crashing.ask('/call client__mcp__add {"a": 40, "b": 2}')
        assert texts(of_type(after, "tool_result")[0])[0] == "42"
        # The same tools after the restart: nothing was replaced.
        assert not of_type(crashing.events(), "client_tools_updated")
        line = crashing.wait_said(f"(call {result['call_id']})")
        assert line.startswith("call crash: error in "), line


@pytest.mark.parametrize("stopping", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_leaves_the_registration_and_stops_the_child(
    served: Served, tmp_path: Path, stopping: signal.Signals
) -> None:
    with bridge(served, tmp_path) as leaving:
        [client] = leaving.clients()
        [child] = wait_until("the child", lambda: children(leaving.process.pid))
        assert leaving.stop(stopping) == 0, leaving.said()
        assert leaving.clients() == []
        said = leaving.said()
    assert "Traceback" not in "\n".join(said)
    assert f"{stopping.name}: stopping; the calls in hand finish first (up to 10 s)" in said
    assert said[-1] == f"stopped: drained 0 calls, left the registration {client['id']}", said
    assert not alive(child)
    [left] = of_type(leaving.events(), "client_left")
    assert left["reason"] == "departed"


def test_a_call_in_hand_on_stop_finishes_before_the_registration_is_left(served: Served, tmp_path: Path) -> None:
    with bridge(served, tmp_path) as draining:
        run_id = draining.send('/call client__mcp__slow {"steps": 2}')
        wait_until("the ack", lambda: of_type(draining.since(run_id), "client_tool_acked"))
        assert draining.stop() == 0, draining.said()
        events = draining.events()
        said = draining.said()
    kinds = [e["type"] for e in events]
    [result] = of_type(events, "tool_result")
    assert texts(result)[0] == "2 steps done"
    assert kinds.index("tool_result") < kinds.index("client_left")
    assert said[-1].startswith("stopped: drained 1 call, left the registration "), said


def kit_over_http(seen: Seen) -> contextlib.AbstractContextManager[str]:
    """The kit over Streamable HTTP in a thread with a loop of its own (these tests are sync)."""
    return in_thread(lambda: serving("http", seen))


def test_a_server_over_http_with_headers_and_json_lines(served: Served, tmp_path: Path) -> None:
    seen = Seen()
    with kit_over_http(seen) as url:
        args = ("--server-url", url, "--header", "X-Team: blue", "--log-format", "json", "--name", "remote")
        with bridge(served, tmp_path, *args, server=()) as remote:
            events = remote.ask('/call client__remote__add {"a": 1, "b": 2}')
            assert texts(of_type(events, "tool_result")[0])[0] == "3"
            assert remote.stop() == 0
            records = [json.loads(line) for line in remote.said()]
    assert "add" in seen.began
    assert any(headers.get("x-team") == "blue" for headers in seen.headers), seen.headers
    started = next(r for r in records if r.get("event") == "server_started")
    connected = started["msg"].startswith(f"connected to the MCP server at {url} over HTTP")
    assert (started["tools"], connected) == (len(KIT_TOOLS), True)
    [call] = [r for r in records if r.get("event") == "call"]
    assert (call["tool"], call["outcome"]) == ("add", "ok")
    assert call["duration_ms"] >= 0
    assert records[-1]["event"] == "stopped"
    assert records[-1]["left"] is True
