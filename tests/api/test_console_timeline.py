"""The console's run timeline against a real stack: the trace link's template (a setting checked at start,
handed to API keys alone by `GET /console/config`), and a real run's log (an approval, a client's ack, an
input request) drawn by the console's own module in Node with each wait as long as its events say."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from switchboard.settings import Settings
from tests.api.test_input_requests import ASK, CALL, answer, ask
from tests.api_client import Api, Event, of_type, run_over, running_api, whole_log

TIMELINE = Path(__file__).resolve().parents[2] / "api" / "static" / "timeline.js"
TEMPLATE = "https://tempo.example/explore?trace={trace_id}"


@pytest.fixture
async def traced(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    update: dict[str, object] = {"trace_url_template": TEMPLATE}
    async with running_api(settings, redis_url, api_key, update, worker=False) as api:
        yield api


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("http://jaeger:16686/trace/", "must contain {trace_id}"),
        ("http://jaeger:16686/trace/{traceid}", "must contain {trace_id}"),
        ("javascript:alert('{trace_id}')", "must be an http or https URL with a host"),
        ("/trace/{trace_id}", "must be an http or https URL with a host"),
        ("https:///trace/{trace_id}", "must be an http or https URL with a host"),
        ("https://jaeger/" + "x" * 2048 + "{trace_id}", "at most 2048 characters"),
    ],
)
def test_the_template_is_refused_at_start_naming_the_setting(value: str, problem: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(trace_url_template=value)
    assert "trace_url_template" in str(refused.value)
    assert problem in str(refused.value)


def test_the_template_reads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().trace_url_template is None
    monkeypatch.setenv("SWITCHBOARD_TRACE_URL_TEMPLATE", "")
    assert Settings().trace_url_template is None
    monkeypatch.setenv("SWITCHBOARD_TRACE_URL_TEMPLATE", "http://jaeger:16686/trace/{trace_id}")
    assert Settings().trace_url_template == "http://jaeger:16686/trace/{trace_id}"


async def test_an_api_key_gets_the_template_and_a_session_token_does_not(
    traced: Api, settings: Settings, redis_url: str, api_key: str
) -> None:
    got = await traced.key.get("/console/config")
    assert got.status_code == 200
    assert got.json() == {"trace_url_template": TEMPLATE}
    assert got.headers["cache-control"] == "no-store"
    session = await traced.session()
    async with traced.as_session(session) as user:
        assert (await user.get("/console/config")).json() == {"trace_url_template": None}
    async with httpx.AsyncClient(base_url=str(traced.key.base_url)) as anonymous:
        refused = await anonymous.get("/console/config")
        assert refused.status_code == 401
        assert "missing credential" in refused.json()["error"]["message"]
        wrong = await anonymous.get("/console/config", headers={"Authorization": "Bearer swb_ak_" + "x" * 43})
        assert wrong.status_code == 401
    # Unset: no link for anyone.
    async with running_api(settings, redis_url, api_key, {}, worker=False) as untraced:
        assert (await untraced.key.get("/console/config")).json() == {"trace_url_template": None}


def timeline_of(events: list[Event]) -> Any:
    script = f"""
        import * as tl from {json.dumps(TIMELINE.as_uri())};
        const timeline = new tl.Timeline();
        for (const event of {json.dumps(events)}) timeline.add(event);
        const run = timeline.runs().at(-1);
        console.log(JSON.stringify({{ run, drawn: tl.layout(run, run.end) }}));
    """
    printed = subprocess.run(
        ["node", "--input-type=module", "-e", script], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    return json.loads(printed)


def us(event: Event) -> int:
    """An event's `created_at` in microseconds, read independently of the module under test."""
    stamp = str(event["created_at"])
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    seconds = int(datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp())
    return seconds * 1_000_000 + int(fraction.ljust(6, "0")[:6])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js (node on PATH), which .ci/run installs")
async def test_a_real_runs_waits_are_as_long_as_its_events_say(api: Api) -> None:
    session = await api.session(client_tool_policies={"client__web__highlight_row": "require_approval"})
    web = await api.register(session)
    await api.send(session, CALL)
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    call_id = of_type(events, "approval_requested")[0]["call_id"]
    allowed = await api.key.post(f"/v1/sessions/{session.id}/approvals/{call_id}", json={"decision": "allow"})
    assert allowed.status_code == 200, allowed.text
    await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert (await api.call(session, web["id"], call_id, "ack")).status_code == 200
    request_id = (await ask(api, session, web["id"], call_id, ASK)).json()["request_id"]
    await answer(api, session, request_id, {"action": "accept", "content": {"amount": 1, "confirm": True}})
    assert (await api.call(session, web["id"], call_id, "result", text="sent")).status_code == 204
    await api.wait_for(session, run_over)
    path = f"/v1/sessions/{session.id}/events"
    # What the console asks for (console.js `connect`'s include).
    log = await whole_log(lambda page: api.key.get(path, params={**page, "include": "progress,extensions,timing"}))

    seen = timeline_of(log)
    one = {
        kind: of_type(log, kind)[0]
        for kind in (
            "run_queued",
            "run_started",
            "approval_requested",
            "approval_resolved",
            "client_tool_dispatched",
            "client_tool_acked",
            "input_requested",
            "input_provided",
            "tool_result",
            "run_completed",
            "tool_call",
        )
    }
    steps = [e for e in log if e["type"] == "custom" and e["payload"].get("scope") == "step"]
    assert seen["run"]["outcome"] == "completed"
    assert seen["drawn"]["duration"] == us(one["run_completed"]) - us(one["run_queued"])
    rows = [(r["depth"], r["kind"], r["state"], r["duration"]) for r in seen["drawn"]["rows"]]

    def between(first: str, then: str) -> int:
        return us(one[then]) - us(one[first])

    assert rows == [
        (0, "queue", "started", between("run_queued", "run_started")),
        (0, "step", "done", steps[0]["payload"]["step_ms"] * 1000),
        (0, "client", "done", between("tool_call", "tool_result")),
        (1, "approval", "allowed", between("approval_requested", "approval_resolved")),
        (1, "ack", "acked", between("client_tool_dispatched", "client_tool_acked")),
        (1, "client", "ended", between("client_tool_acked", "tool_result")),
        (1, "input", "accept", between("input_requested", "input_provided")),
        (0, "step", "done", steps[1]["payload"]["step_ms"] * 1000),
    ]
    # Each step ends where it committed: the first with the call it made.
    first_step = seen["drawn"]["rows"][1]
    assert first_step["end"] == us(steps[0]) == us(one["tool_call"])
