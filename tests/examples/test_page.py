"""examples/page.html in a real browser (Playwright with Debian's chromium), served from an origin of its
own as an app's page would be, its agent allowing that origin: a scripted run calls its page tool."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from broker.transport.embedded import free_port
from tests.e2e.browser import chromium
from tests.e2e.served import Served, scripted_session
from tests.examples.support import ENDS, EXAMPLES, admin, of_type, session_log, text_of

pytestmark = [pytest.mark.processes, pytest.mark.browser, pytest.mark.timeout(120), pytest.mark.xdist_group("page")]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextlib.contextmanager
def static_site(folder: Path) -> Iterator[str]:
    """`folder` served on a port of its own (another origin than the API's); its origin."""
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with static_site(EXAMPLES) as origin:
        yield origin


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


async def session_for(served: Served, origins: list[str]) -> tuple[str, str]:
    """A session of a new scripted agent whose security document allows `origins`: its id and token."""
    sid, token = await scripted_session(served.url, served.key, "page example")
    with admin(served) as http:
        agent_id = http.get(f"/v1/sessions/{sid}").json()["agent_id"]
        answer = http.put(f"/v1/agents/{agent_id}/security", json={"allowed_origins": origins})
    assert answer.status_code == 200, answer.text
    return sid, token


async def open_page(browser: Browser, url: str) -> tuple[Page, list[str]]:
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(url)
    return page, errors


async def send(served: Served, sid: str, token: str, text: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=10) as http:
        answer = await http.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": text})
    assert answer.status_code == 200, answer.text


async def test_a_run_calls_the_page_tool_of_a_page_on_another_origin(
    served: Served, site: str, browser: Browser
) -> None:
    sid, token = await session_for(served, [site])
    page, errors = await open_page(browser, f"{site}/page.html#api={served.url}&session={sid}&token={token}")
    await expect(page.locator("body")).to_have_attribute("data-client", "page", timeout=15_000)
    await expect(page.locator("#status")).to_have_attribute("data-state", "serving")
    # The token is read from the fragment and taken out of the address bar.
    assert token not in page.url
    await page.fill('input[name="city"]', "Lisbon")
    await page.select_option('select[name="country"]', "PT")

    calls = ['/call client__page__read_field {"field": "city"}', '/call client__page__read_field {"field": "zip"}']
    await send(served, sid, token, "\n".join(calls))
    await expect(page.locator("#answers li")).to_have_count(1, timeout=15_000)

    events = session_log(served, sid)
    assert of_type(events, "run_completed"), [e["type"] for e in events if e["type"] in ENDS]
    arguments = {c["call_id"]: c["arguments"]["field"] for c in of_type(events, "tool_call")}
    results = {arguments[r["call_id"]]: r for r in of_type(events, "tool_result")}
    city = results["city"]
    assert not city["is_error"], city
    assert json.loads(text_of(city)) == {"field": "city", "value": await page.input_value('input[name="city"]')}
    # A field the form does not have: an error result naming the ones it has.
    missing = results["zip"]
    assert missing["is_error"]
    assert "zip" in text_of(missing)
    assert "city" in text_of(missing)
    # The page shows the model's answer, as the log holds it.
    answer = text_of(of_type(events, "message_assistant")[-1])
    assert (await page.locator("#answers li").inner_text()).strip() == answer.strip()
    assert not errors, errors
    await page.close()


async def test_the_page_says_so_when_its_origin_is_not_allowed(served: Served, site: str, browser: Browser) -> None:
    sid, token = await session_for(served, ["http://127.0.0.1:1"])
    page, errors = await open_page(browser, f"{site}/page.html#api={served.url}&session={sid}&token={token}")
    await expect(page.locator("#status")).to_have_attribute("data-state", "failed", timeout=15_000)
    await expect(page.locator("#status")).to_contain_text("allowed_origins")
    await expect(page.locator("#status")).to_contain_text(site)
    assert not of_type(session_log(served, sid), "client_registered")
    assert not errors, errors
    await page.close()


async def test_the_page_without_a_session_says_what_it_needs(site: str, browser: Browser) -> None:
    page, errors = await open_page(browser, f"{site}/page.html")
    await expect(page.locator("#status")).to_have_attribute("data-state", "failed")
    await expect(page.locator("#status")).to_contain_text("session=SESSION_ID")
    assert not errors, errors
    await page.close()
