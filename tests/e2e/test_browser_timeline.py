"""The console's run timeline in a real browser (Playwright with Debian's chromium): a real run's waterfall
(an approval, a client's ack, an input request whose message is markup), the link to its trace where the
deployment sets SWITCHBOARD_TRACE_URL_TEMPLATE and the run's events carry a trace id, for an API key and not
for a session token, and a new run followed as it comes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, BrowserContext, Page, Route, expect

from tests.e2e.served import Served, api_and_worker, scripted_session
from tests.helpers import HIGHLIGHT

pytestmark = [pytest.mark.processes, pytest.mark.browser, pytest.mark.timeout(120)]

TEMPLATE = "http://jaeger.example:16686/trace/{trace_id}"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
HOSTILE = "<img src=x onerror=\"document.title='owned'\">"
# What the console asks its stream for (console.js).
INCLUDE = "progress,images,extensions,timing"


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[Served]:
    settings = {"ack_timeout_s": "20", "result_timeout_s": "20", "trace_url_template": TEMPLATE}
    with api_and_worker(redis_url, tmp_path / "logs", **settings) as running:
        yield running


async def until(app: httpx.AsyncClient, path: str, kind: str) -> list[dict[str, Any]]:
    for _ in range(100):
        events: list[dict[str, Any]] = (await app.get(path, params={"include": INCLUDE, "limit": 200})).json()["items"]
        if any(e["type"] == kind for e in events):
            return events
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {kind}")


async def a_run_with_waits(served: Served) -> tuple[str, str, list[dict[str, Any]]]:
    """A session whose one run's call waited for an approval, its client's ack and an input request (asked
    with markup as its message): the session id, its token and its log as the console reads it."""
    policy = {"client__web__highlight_row": "require_approval"}
    session_id, token = await scripted_session(served.url, served.key, "timed", client_tool_policies=policy)
    path = f"/v1/sessions/{session_id}"
    async with (
        httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {token}"}) as app,
        httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.key}"}) as admin,
    ):
        body = {"name": "web", "lifetime": {"type": "never"}, "tools": [HIGHLIGHT]}
        web = (await app.post(f"{path}/clients", json=body)).json()
        text = '/call client__web__highlight_row {"row_id": "1"}'
        assert (await app.post(f"{path}/events", json={"type": "input", "text": text})).status_code == 200
        events = await until(app, f"{path}/events", "approval_requested")
        [asked] = [e for e in events if e["type"] == "approval_requested"]
        allowed = await admin.post(f"{path}/approvals/{asked['call_id']}", json={"decision": "allow"})
        assert allowed.status_code == 200, allowed.text
        await until(app, f"{path}/events", "client_tool_dispatched")
        calls = f"{path}/clients/{web['id']}/calls/{asked['call_id']}"
        assert (await app.post(f"{calls}/ack")).status_code == 200
        form = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        request = await app.post(f"{calls}/input-requests", json={"message": HOSTILE, "schema": form})
        assert request.status_code == 201, request.text
        answered = await app.post(f"{path}/input-requests/{request.json()['request_id']}", json={"action": "decline"})
        assert answered.status_code == 200, answered.text
        assert (await app.post(f"{calls}/result", json={"text": "lit"})).status_code == 204
        log = await until(app, f"{path}/events", "run_completed")
    return session_id, token, sorted(log, key=lambda e: int(e["seq"]))


async def with_trace_id(page: Page, log: list[dict[str, Any]]) -> None:
    """The page's first event stream answers with `log`, its run_started carrying TRACE (as a traced
    deployment's does); the stream's reconnection after it goes to the server."""
    frames = [
        f"id: {e['seq']}\ndata: {json.dumps(e | ({'trace_id': TRACE} if e['type'] == 'run_started' else {}))}\n\n"
        for e in log
    ]
    body = "retry: 100\n\n" + "".join(frames)

    async def answer(route: Route) -> None:
        assert f"include={INCLUDE.replace(',', '%2C')}" in route.request.url
        await route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=body)

    await page.route("**/events/stream?*", answer, times=1)


async def console_page(context: BrowserContext, url: str, log: list[dict[str, Any]]) -> tuple[Page, list[str]]:
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await with_trace_id(page, log)
    await page.goto(url)
    return page, errors


async def test_a_runs_waterfall_and_its_trace_link(served: Served, browser: Browser) -> None:
    session_id, token, log = await a_run_with_waits(served)
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    console, errors = await console_page(context, f"{served.url}/console#key={served.key}&session={session_id}", log)
    timeline = console.locator("#timeline")
    run = timeline.locator(".tl-run")
    await expect(run.locator(".tl-head")).to_contain_text("completed")
    kinds = [await row.get_attribute("data-kind") for row in await run.locator(".tl-row").all()]
    assert kinds == ["queue", "step", "client", "approval", "ack", "client", "input", "step"]
    await expect(run.locator(".tl-row.kind-approval")).to_contain_text("allowed")
    await expect(run.locator(".tl-row.kind-input")).to_contain_text("decline")
    # The message is shown as the text it is: no element made of it, nothing of it run.
    await expect(run.locator(".tl-row.kind-input .tl-label")).to_contain_text(HOSTILE)
    assert await timeline.locator("img").count() == 0
    assert await console.title() == "Switchboard console"
    # Every bar lies on the run's span.
    for bar in await run.locator(".tl-bar").all():
        box, track = await bar.bounding_box(), await bar.locator("xpath=..").bounding_box()
        assert box is not None
        assert track is not None
        assert track["x"] - 1 <= box["x"]
        assert box["x"] + box["width"] <= track["x"] + track["width"] + 1

    link = run.locator("a.trace")
    assert await link.get_attribute("href") == TEMPLATE.replace("{trace_id}", TRACE)
    assert (await link.get_attribute("target"), await link.get_attribute("rel")) == ("_blank", "noopener noreferrer")

    # A new run is followed as it comes; it carries no trace id, so it has no link.
    await expect(console.locator("#conn")).to_have_text("open")
    await console.fill("#say", "hello")
    await console.press("#say", "Enter")
    await expect(timeline.locator(".tl-runs button")).to_have_count(2)
    await expect(run.locator(".tl-head")).to_contain_text("completed")
    assert await run.get_attribute("data-run") != next(e["run_id"] for e in log if e["type"] == "run_started")
    assert await run.locator("a.trace").count() == 0
    # The first run, picked, shows again.
    await timeline.locator(".tl-runs button").nth(1).click()
    await expect(run.locator("a.trace")).to_have_count(1)
    assert errors == []
    await context.close()

    # A session token's console draws the same waterfall, with no link to the operators' trace UI.
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{served.url}/console")
    await page.evaluate(
        "([token, session]) => { localStorage.setItem('switchboard.console.token', token);"
        " localStorage.setItem('switchboard.console.session', session); }",
        [token, session_id],
    )
    await with_trace_id(page, log)
    await page.goto(f"{served.url}/console#session={session_id}")
    user_run = page.locator("#timeline .tl-run")
    # The stream goes on from the server after the log it was handed: the newer run comes, the first is picked.
    await expect(page.locator("#timeline .tl-runs button")).to_have_count(2)
    await page.locator("#timeline .tl-runs button").nth(1).click()
    await expect(user_run.locator(".tl-row")).to_have_count(8)
    await expect(user_run.locator(".tl-head")).to_contain_text("completed")
    assert await user_run.locator("a.trace").count() == 0
    await context.close()
