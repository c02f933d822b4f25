"""The console and the API's own pages in a real browser (Playwright with Debian's chromium): a session
token signed in, approvals decided, the console and the demo sharing a key and linking to each other,
the landing page, and the API docs with no other host reachable."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Dialog, Route, expect

from tests.e2e.browser import demo_tab, say, served_for_browser
from tests.e2e.served import Served, scripted_session
from tests.helpers import HIGHLIGHT

pytestmark = [pytest.mark.processes, pytest.mark.browser, pytest.mark.timeout(120)]


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[Served]:
    yield from served_for_browser(redis_url, tmp_path / "logs")


async def test_the_console_refuses_a_bad_credential_and_a_token_sees_only_its_session(
    served: Served, browser: Browser
) -> None:
    url, key = served.url, served.key
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    demo = await demo_tab(context, f"{url}/demo#key={key}", "web")
    session_id = demo.url.split("session=")[1]
    token = await demo.evaluate(f"localStorage.getItem('switchboard.demo.token.{session_id}')")
    console = await context.new_page()
    await console.goto(f"{url}/console")
    # The demo's key is the console's too (one store, one origin): sign out of it to use the token.
    await expect(console.locator("#signout")).to_be_visible()
    await console.click("#signout")
    await console.fill('input[name="credential"]', token)
    await console.click("#signin-form button")
    await expect(console.locator("#signin-error")).to_contain_text("Give the session id")
    await console.fill('input[name="session"]', session_id)
    await console.click("#signin-form button")
    await expect(console.locator("#conn")).to_have_text("open")
    await expect(console.locator('#clients [data-client="web"]')).to_be_visible()
    await console.fill("#say", "hello from the console")
    await console.press("#say", "Enter")
    await expect(console.locator(".msg.assistant")).to_contain_text("You said: hello from the console")
    await expect(demo.locator("#transcript")).to_contain_text("You said: hello from the console")
    # A run that would take a while is cancelled from the console.
    await expect(console.locator("#cancel")).to_be_disabled()
    await console.fill("#say", "/sleep 30")
    await console.press("#say", "Enter")
    await expect(console.locator("#cancel")).to_be_enabled()
    # Cancel asks first.
    asked: list[str] = []

    async def confirm(dialog: Dialog) -> None:
        asked.append(dialog.message)
        await dialog.accept()

    console.once("dialog", confirm)
    await console.click("#cancel")
    await expect(console.locator("#transcript")).to_contain_text("run cancelled")
    assert [message.split("?")[0] for message in asked] == ["Cancel the run"]
    await expect(console.locator("#cancel")).to_be_disabled()
    await context.close()


async def test_approvals_are_decided_in_the_console(served: Served, browser: Browser) -> None:
    policy = {"client__web__highlight_row": "require_approval"}
    session_id, token = await scripted_session(served.url, served.key, "careful", client_tool_policies=policy)
    path = f"/v1/sessions/{session_id}"
    async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {token}"}) as app:
        body = {"name": "web", "lifetime": {"type": "never"}, "tools": [HIGHLIGHT]}
        web = (await app.post(f"{path}/clients", json=body)).json()
        context = await browser.new_context()
        console = await context.new_page()
        console.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept("not during the audit")))
        await console.goto(f"{served.url}/console#key={served.key}&session={session_id}")
        await expect(console.locator("#conn")).to_have_text("open")

        async def ask(row: str) -> None:
            text = f'/call client__web__highlight_row {{"row_id": "{row}"}}'
            assert (await app.post(f"{path}/events", json={"type": "input", "text": text})).status_code == 200

        await ask("1")
        pending = console.locator("#approvals .approval")
        await expect(pending).to_contain_text('{"row_id":"1"}')
        await expect(console.locator(".call.awaiting")).to_be_visible()
        await pending.get_by_role("button", name="Allow").click()
        await expect(console.locator(".call.dispatched")).to_be_visible()
        # The card says who decided: this console's key.
        await expect(console.locator(".call.dispatched .decision")).to_contain_text("allowed by you (")
        await expect(console.locator("#approvals")).to_contain_text("None.")
        events = (await app.get(f"{path}/events", params={"order": "desc", "limit": 20})).json()["items"]
        [dispatched] = [e for e in events if e["type"] == "client_tool_dispatched"]
        calls = f"{path}/clients/{web['id']}/calls/{dispatched['call_id']}"
        assert (await app.post(f"{calls}/result", json={"text": "row 1 lit"})).status_code == 204
        await expect(console.locator(".call.answered")).to_contain_text("row 1 lit")
        await expect(console.locator(".msg.assistant")).to_contain_text("client__web__highlight_row: row 1 lit")

        await ask("2")
        await console.locator("#approvals .approval").get_by_role("button", name="Deny").click()
        await expect(console.locator(".call.denied")).to_contain_text("not during the audit")
        await expect(console.locator(".msg.assistant").last).to_contain_text("failed")
        await context.close()


async def test_the_docs_work_with_no_other_host_reachable(served: Served, browser: Browser) -> None:
    context = await browser.new_context()
    outside: list[str] = []

    async def only_the_api(route: Route) -> None:
        if route.request.url.startswith(served.url):
            await route.continue_()
        else:
            outside.append(route.request.url)
            await route.abort()

    await context.route("**/*", only_the_api)
    page = await context.new_page()
    await page.goto(f"{served.url}/docs")
    await expect(page.locator(".swagger-ui .info .title")).to_contain_text("Switchboard", timeout=15_000)
    await expect(page.get_by_role("button", name="Authorize")).to_be_visible()
    await page.goto(f"{served.url}/redoc")
    await expect(page.locator("h1", has_text="Switchboard")).to_be_visible(timeout=15_000)
    # The side menu, which carries ReDoc's own logo, has been drawn too.
    await expect(page.get_by_text("API docs by Redocly")).to_be_visible()
    await page.wait_for_load_state("networkidle")
    assert outside == []
    await context.close()


async def test_the_console_and_demo_share_a_key_follow_links_and_say_who_did_what(
    served: Served, browser: Browser
) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    landing = await context.new_page()
    await landing.goto(f"{served.url}/")
    for card, href in (("#demo", "/demo"), ("#console", "/console"), ("#docs", "/docs")):
        assert await landing.locator(card).get_attribute("href") == href
    await expect(landing.locator("main")).to_contain_text("switchboard session new")

    first = await demo_tab(context, f"{served.url}/demo#key={served.key}", "web")
    session_id = first.url.split("session=")[1]
    second = await demo_tab(context, first.url, "web-2")
    # The demo's own link opens the console on its session, signed in with the same key.
    link = await first.locator("#console-link").get_attribute("href")
    linked = await context.new_page()
    await linked.goto(f"{served.url}{link}")
    await expect(linked.locator("#crumb")).to_contain_text(session_id)
    await expect(linked.locator("#conn")).to_have_text("open")
    await expect(linked.locator('#clients [data-client="web-2"]')).to_be_visible()
    labels = [await linked.locator(f'#clients [data-client="{name}"] code').inner_text() for name in ("web", "web-2")]
    assert labels[0] != labels[1], labels  # two tabs told apart by the ends of their ids
    # A page result reads as fields, not escaped JSON.
    await say(second, '/call client__web-2__read_page {"max_chars": 200}')
    await expect(second.locator("#transcript .ev", has_text="result ←").last).to_contain_text("title: Switchboard demo")

    # The session list follows new sessions by itself.
    console = await context.new_page()
    await console.goto(f"{served.url}/console")
    await expect(console.locator("#session-rows tr.clickable").first).to_be_visible()
    fresh, _ = await scripted_session(served.url, served.key, "fresh")
    await expect(console.locator("#session-rows")).to_contain_text(fresh, timeout=10_000)
    await context.close()

    # A link to a session from a browser that is not signed in opens that session once signed in.
    stranger = await browser.new_context(viewport={"width": 390, "height": 844})
    page = await stranger.new_page()
    await page.goto(f"{served.url}/console#session={session_id}")
    await expect(page.locator("#signin-error")).to_contain_text("Sign in to open the session the link named")
    await page.fill('input[name="credential"]', served.key)
    await page.click("#signin-form button")
    await expect(page.locator("#crumb")).to_contain_text(session_id)
    await stranger.close()


async def test_input_requests_are_answered_in_the_console(served: Served, browser: Browser) -> None:
    session_id, token = await scripted_session(served.url, served.key, "asking")
    path = f"/v1/sessions/{session_id}"
    form = {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "title": "Amount", "minimum": 0},
            "account": {"type": "string", "enum": ["checking", "savings"]},
            "confirm": {"type": "boolean"},
        },
        "required": ["amount", "account"],
    }
    async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {token}"}) as app:
        body = {"name": "web", "lifetime": {"type": "never"}, "tools": [HIGHLIGHT]}
        web = (await app.post(f"{path}/clients", json=body)).json()
        text = '/call client__web__highlight_row {"row_id": "1"}'
        assert (await app.post(f"{path}/events", json={"type": "input", "text": text})).status_code == 200
        for _ in range(100):
            events = (await app.get(f"{path}/events", params={"order": "desc", "limit": 20})).json()["items"]
            dispatched = [e for e in events if e["type"] == "client_tool_dispatched"]
            if dispatched:
                break
            await asyncio.sleep(0.1)
        calls = f"{path}/clients/{web['id']}/calls/{dispatched[0]['call_id']}"
        assert (await app.post(f"{calls}/ack")).status_code == 200
        context = await browser.new_context()
        console = await context.new_page()
        await console.goto(f"{served.url}/console#key={served.key}&session={session_id}")
        await expect(console.locator("#conn")).to_have_text("open")

        asked = await app.post(f"{calls}/input-requests", json={"message": "Move how much?", "schema": form})
        assert asked.status_code == 201, asked.text
        card = console.locator(f'#inputs [data-request="{asked.json()["request_id"]}"]')
        await expect(card).to_contain_text("Move how much?")
        await card.locator('input[name="amount"]').fill("12.5")
        await card.locator('select[name="account"]').select_option("savings")
        await card.locator('input[name="confirm"]').check()
        await card.get_by_role("button", name="Accept").click()
        await expect(card).to_contain_text('accepted by you: {"amount":12.5,"account":"savings","confirm":true}')
        read = (await app.get(f"{path}/input-requests/{asked.json()['request_id']}")).json()
        assert (read["state"], read["content"]) == ("answered", {"amount": 12.5, "account": "savings", "confirm": True})

        page = await app.post(f"{calls}/input-requests", json={"message": "Sign here", "url": "https://example.com/s"})
        linked = console.locator(f'#inputs [data-request="{page.json()["request_id"]}"]')
        await expect(linked.locator('a[href="https://example.com/s"]')).to_be_visible()
        await linked.get_by_role("button", name="Decline").click()
        await expect(linked).to_contain_text("declined by you")

        # One still open when the call settles shows that it ended with its call.
        last = await app.post(f"{calls}/input-requests", json={"message": "Anything else?", "schema": form})
        ended = console.locator(f'#inputs [data-request="{last.json()["request_id"]}"]')
        await expect(ended.get_by_role("button", name="Accept")).to_be_visible()
        assert (await app.post(f"{calls}/result", json={"text": "row 1 lit"})).status_code == 204
        await expect(ended).to_contain_text("cancelled: its call ended first")
        await context.close()
