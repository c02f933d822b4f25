"""The first minutes with the demo, the console and the docs pages, as a new user meets them (issue 22):
what a signed-out page asks for, labels that read as words, tools that report what really happened, the
narrow layout, the console's transcript edge, one demo agent per workspace, the way back from /docs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from tests.e2e.browser import demo_tab, say, served_for_browser
from tests.e2e.served import Served, scripted_session
from tests.helpers import HIGHLIGHT

pytestmark = [pytest.mark.processes, pytest.mark.browser, pytest.mark.timeout(120)]

DEMO_AGENT = "Switchboard demo (scripted)"


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[Served]:
    yield from served_for_browser(redis_url, tmp_path / "logs")


def admin(served: Served) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.key}"}, timeout=10)


async def example(page: Page, label: str) -> None:
    """Press one of the demo's example buttons, then Send."""
    await page.locator("#examples button", has_text=label).click()
    await page.click("#ask button")


async def test_a_signed_out_demo_says_what_it_needs_and_links_nothing_that_cannot_work(
    served: Served, browser: Browser
) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    await page.goto(f"{served.url}/demo")
    signin = page.locator("#signin")
    await expect(signin).to_be_visible()
    await expect(signin).to_contain_text("needs an API key")
    await expect(signin).to_contain_text("switchboard up")
    await expect(signin).to_contain_text(".switchboard/dev-api-key")
    await expect(signin).to_contain_text("localStorage")
    # No "connecting" while nothing connects, and no console link while there is no session to open.
    for hidden in ("#conn-pill", "#console-link", "#who", "#app"):
        await expect(page.locator(hidden)).to_be_hidden()
    assert "connecting" not in await page.locator("header").inner_text()
    links = await page.locator("a[href]:visible").evaluate_all("links => links.map((a) => a.getAttribute('href'))")
    assert links == ["/"], links  # the landing page, which works signed out

    # A key the server refuses: said so, and asked for again (not kept).
    await page.fill('#signin-form input[name="key"]', "swb_ak_" + "x" * 43)
    await page.click("#signin-form button")
    await expect(page.locator("#signin-error")).to_contain_text("The server refused the key")
    await expect(signin).to_be_visible()
    assert await page.evaluate("localStorage.getItem('switchboard.key')") is None
    await expect(page.locator("#console-link")).to_be_hidden()

    # The right key: the demo starts, and its header reads as words, the pill apart from the link.
    await page.fill('#signin-form input[name="key"]', served.key)
    await page.click("#signin-form button")
    await expect(page.locator("body")).to_have_attribute("data-client", "web", timeout=15_000)
    await expect(page.locator("#conn-pill")).to_have_text("connection: open")
    link = page.locator("#console-link")
    await expect(link).to_have_text("Open this session in the console")
    session_id = page.url.split("session=")[1]
    assert await link.get_attribute("href") == f"/console#session={session_id}"
    await context.close()


async def test_the_form_examples_report_what_really_happened(served: Served, browser: Browser) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    tab = await demo_tab(context, f"{served.url}/demo#key={served.key}", "web")
    session_id = tab.url.split("session=")[1]
    transcript = tab.locator("#transcript")

    # "Send reminder" on the empty form: the browser stops the submit, and the tool's result says so.
    await example(tab, "Send reminder")
    failed = transcript.locator(".ev.error", has_text="was not submitted")
    await expect(failed).to_contain_text('form "reminder" was not submitted: Customer: ')
    await expect(tab.locator("#submitted")).to_have_text("")
    await say(tab, '/call client__web__submit_form {"form": "reminder"}')
    await expect(transcript).to_contain_text(
        'client__web__submit_form failed: form "reminder" was not submitted: Customer: '
    )
    async with admin(served) as api:
        events = (await api.get(f"/v1/sessions/{session_id}/events", params={"limit": 100})).json()["items"]
    results = [e for e in events if e["type"] == "tool_result"]
    assert len(results) == 2
    assert all(result["is_error"] for result in results), results

    # "Both at once": two calls in one turn that do not depend on each other, both done.
    await example(tab, "Both at once")
    await expect(tab.locator('#rows tr.highlighted[data-row-id="4"]')).to_be_visible()
    await expect(tab.locator('input[name="customer"]')).to_have_value("Omar Haddad")
    await expect(tab.locator('select[name="tone"]')).to_have_value("firm")
    await expect(transcript).to_contain_text('client__web__fill_form: filled input "customer" = "Omar Haddad"')
    # Now the reminder goes, and the result says it did.
    await example(tab, "Send reminder")
    await expect(tab.locator("#submitted")).to_have_text("Reminder for Omar Haddad (firm) sent.")
    await expect(transcript).to_contain_text('client__web__click: clicked button "send reminder"')
    await context.close()


# True once the element is wholly on screen and above the chat (which covers the bottom of a narrow
# screen), and the chat's transcript is wholly on screen too.
IN_SIGHT = """(selector) => {
  const element = document.querySelector(selector);
  if (!element) return false;
  const box = element.getBoundingClientRect();
  const chat = document.getElementById("chat").getBoundingClientRect();
  const transcript = document.getElementById("transcript").getBoundingClientRect();
  return box.top >= 0 && box.bottom <= chat.top && transcript.top >= 0 && transcript.bottom <= innerHeight;
}"""


async def test_at_390_wide_an_example_and_its_effect_are_in_sight_together(served: Served, browser: Browser) -> None:
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    tab = await demo_tab(context, f"{served.url}/demo#key={served.key}", "web")
    transcript = tab.locator("#transcript")
    await example(tab, "Highlight row 2")
    await expect(transcript).to_contain_text("client__web__highlight_row: row 2 (Kenji Mori) is highlighted")
    await tab.wait_for_function(IN_SIGHT, arg="#rows tr.highlighted")
    # The form is below the table: filling it and sending the reminder bring it, and what it says, into sight.
    await example(tab, "Fill the form")
    await expect(tab.locator('input[name="customer"]')).to_have_value("Kenji Mori")
    await tab.wait_for_function(IN_SIGHT, arg='input[name="customer"]')
    await example(tab, "Send reminder")
    await expect(tab.locator("#submitted")).to_have_text("Reminder for Kenji Mori (firm) sent.")
    await expect(transcript).to_contain_text('client__web__click: clicked button "send reminder"')
    await tab.wait_for_function(IN_SIGHT, arg="#submitted")
    await context.close()


async def test_the_demo_makes_one_agent_per_workspace_found_by_name(served: Served, browser: Browser) -> None:
    async with admin(served) as api:
        # One left half-made (a tab closed before it published a version): it is used, and given a version.
        half_made = (await api.post("/v1/agents", json={"name": DEMO_AGENT})).json()["id"]
        other = (await api.post("/v1/agents", json={"name": "Someone else's agent"})).json()["id"]
        sessions = []
        for _ in range(2):
            # A fresh browser each time: nothing of the other is in its storage.
            context = await browser.new_context()
            tab = await demo_tab(context, f"{served.url}/demo#key={served.key}", "web")
            sessions.append(tab.url.split("session=")[1])
            await say(tab, "Hello there")
            await expect(tab.locator("#transcript")).to_contain_text("You said: Hello there")
            await context.close()
        agents = (await api.get("/v1/agents", params={"limit": 200})).json()["items"]
        assert sorted(a["id"] for a in agents if a["name"] == DEMO_AGENT) == [half_made]
        assert other in [a["id"] for a in agents]
        versions = (await api.get(f"/v1/agents/{half_made}/versions")).json()["items"]
        assert len(versions) == 1, versions
        assert sessions[0] != sessions[1]
        for session_id in sessions:
            assert (await api.get(f"/v1/sessions/{session_id}")).json()["agent_id"] == half_made


async def test_the_console_says_where_it_keeps_the_key(served: Served, browser: Browser) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    await page.goto(f"{served.url}/console")
    signin = page.locator("#signin")
    await expect(signin).to_contain_text("localStorage")
    await expect(signin).not_to_contain_text("session storage")
    await expect(signin).to_contain_text(".switchboard/dev-api-key")
    await page.fill('input[name="credential"]', served.key)
    await page.click("#signin-form button")
    await expect(page.locator("#sessions")).to_be_visible()
    assert await page.evaluate("[localStorage.getItem('switchboard.key'), sessionStorage.length]") == [served.key, 0]
    # localStorage, as it says: another tab of this site is signed in too, the demo included.
    other = await context.new_page()
    await other.goto(f"{served.url}/console")
    await expect(other.locator("#sessions")).to_be_visible()
    await expect(other.locator("#signout")).to_be_visible()
    demo = await demo_tab(context, f"{served.url}/demo", "web")
    await expect(demo.locator("#signin")).to_be_hidden()
    # Signing out forgets it for the whole site.
    await page.click("#signout")
    await expect(page.locator("#signin")).to_be_visible()
    assert await other.evaluate("localStorage.getItem('switchboard.key')") is None
    await context.close()


# The transcript's scroll box: its top edge between two entries (none cut through), and its last entry
# wholly in view.
EDGE = """() => {
  const box = document.getElementById("transcript");
  const entries = [...box.children].filter((node) => node.offsetHeight > 0);
  const top = box.scrollTop;
  const cut = entries.filter((node) => node.offsetTop < top - 0.5 && node.offsetTop + node.offsetHeight > top + 0.5);
  const last = entries[entries.length - 1];
  return {
    scrolled: top > 0,
    cut: cut.map((node) => node.textContent.slice(0, 40)),
    lastInView: last.offsetTop + last.offsetHeight <= top + box.clientHeight + 0.5,
  };
}"""


async def edge(page: Page) -> dict[str, Any]:
    # After the frame in which the console settles its scroll.
    await page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    result: dict[str, Any] = await page.evaluate(EDGE)
    return result


async def test_at_1280_the_console_transcript_cuts_no_line_at_its_top(served: Served, browser: Browser) -> None:
    session_id, token = await scripted_session(served.url, served.key, "talkative", message_concurrency="queue")
    path = f"/v1/sessions/{session_id}/events"
    async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {token}"}) as app:
        # Entries of many heights, so the end of the list lands anywhere within one.
        for n in range(14):
            text = "\n".join(f"line {i} of message {n}" for i in range(n % 4 + 1))
            assert (await app.post(path, json={"type": "input", "text": text})).status_code == 200
        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        console = await context.new_page()
        await console.goto(f"{served.url}/console#key={served.key}&session={session_id}")
        await expect(console.locator(".msg.assistant").last).to_contain_text("line 1 of message 13", timeout=30_000)
        assert await edge(console) == {"scrolled": True, "cut": [], "lastInView": True}

        # A new entry while the reader is at the end: followed, still no line cut.
        for n in (14, 15):
            text = "\n".join(f"line {i} of message {n}" for i in range(n % 4 + 1))
            assert (await app.post(path, json={"type": "input", "text": text})).status_code == 200
            await expect(console.locator(".msg.assistant").last).to_contain_text(f"of message {n}")
            assert await edge(console) == {"scrolled": True, "cut": [], "lastInView": True}

        # A reader who scrolled up stays where they are.
        await console.evaluate("document.getElementById('transcript').scrollTop = 0")
        await console.wait_for_timeout(100)
        assert (await app.post(path, json={"type": "input", "text": "one more"})).status_code == 200
        await expect(console.locator(".msg.assistant").last).to_contain_text("You said: one more")
        assert await console.evaluate("document.getElementById('transcript').scrollTop") == 0
        await context.close()


async def test_the_console_says_in_words_who_answered_a_call(served: Served, browser: Browser) -> None:
    policy = {"client__web__highlight_row": "require_approval"}
    session_id, token = await scripted_session(
        served.url, served.key, "mixed", server_tools=["calculate"], client_tool_policies=policy
    )
    path = f"/v1/sessions/{session_id}"
    async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {token}"}) as app:
        body = {"name": "web", "lifetime": {"type": "never"}, "tools": [HIGHLIGHT]}
        assert (await app.post(f"{path}/clients", json=body)).status_code == 201
        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        console = await context.new_page()
        await console.goto(f"{served.url}/console#key={served.key}&session={session_id}")
        await expect(console.locator("#conn-pill")).to_have_text("connection: open")
        text = (
            '/call calculate {"expression": "6*7"}\n/call calculate {"expression": "1/0"}\n/call client__ghost__look {}'
        )
        assert (await app.post(f"{path}/events", json={"type": "input", "text": text})).status_code == 200
        await expect(console.locator(".call.answered", has_text="42")).to_contain_text("calculate on the server")
        await expect(console.locator(".call.error", has_text="division by zero")).to_contain_text(
            "calculate on the server"
        )
        await expect(console.locator(".call.error", has_text="client__ghost__look")).to_contain_text(
            "client__ghost__look never sent to a client"
        )
        await expect(console.locator("#transcript")).not_to_contain_text("by server")

        # A call waiting for approval is for its client, not yet by it.
        call = '/call client__web__highlight_row {"row_id": "1"}'
        assert (await app.post(f"{path}/events", json={"type": "input", "text": call})).status_code == 200
        await expect(console.locator(".call.awaiting")).to_contain_text("highlight_row for client web")
        await expect(console.locator("#approvals .approval")).to_contain_text("highlight_row for client web")
        # On a narrow screen the decision waiting comes first, above the transcript.
        await console.set_viewport_size({"width": 390, "height": 844})
        approvals = await console.locator("#approvals-panel").bounding_box()
        transcript = await console.locator("#transcript").bounding_box()
        assert approvals is not None
        assert transcript is not None
        assert approvals["y"] + approvals["height"] <= transcript["y"], (approvals, transcript)
        await console.set_viewport_size({"width": 1280, "height": 800})
        await console.locator("#approvals .approval").get_by_role("button", name="Allow").click()
        dispatched = console.locator(".call.dispatched", has_text="highlight_row")
        await expect(dispatched).to_contain_text("highlight_row by web (…")
        await context.close()


async def test_the_docs_pages_lead_back_to_the_landing_page(served: Served, browser: Browser) -> None:
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    page = await context.new_page()
    for docs, other in (("/docs", "/redoc"), ("/redoc", "/docs")):
        await page.goto(f"{served.url}{docs}")
        nav = page.locator("#switchboard-nav")
        await expect(nav.locator(f'a[href="{other}"]')).to_be_visible()
        await nav.get_by_role("link", name="← Switchboard").click()
        await expect(page.locator("main h1")).to_have_text("Switchboard")
        assert page.url == f"{served.url}/"
        await expect(page.locator("#docs")).to_have_attribute("href", "/docs")
    await context.close()
