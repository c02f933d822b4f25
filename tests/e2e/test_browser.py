"""The demo and the console in a real browser (Playwright with Debian's chromium): two tabs of one session,
calls landing in the right tab, the console following along, a tab closed and a tab reloaded."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from tests.e2e.served import api_and_worker

pytestmark = [pytest.mark.processes, pytest.mark.browser, pytest.mark.timeout(120)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HAVE_CHROMIUM = Path(CHROMIUM).exists()


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    with api_and_worker(redis_url, tmp_path / "logs", ack_timeout_s="20", result_timeout_s="20") as running:
        yield running


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not HAVE_CHROMIUM:
        pytest.skip(f"no chromium at {CHROMIUM}: `.ci/run` installs Debian's chromium package")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            yield launched
        finally:
            await launched.close()


async def demo_tab(context: BrowserContext, url: str, name: str) -> Page:
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(url)
    await expect(page.locator("body")).to_have_attribute("data-client", name, timeout=15_000)
    assert not errors, errors
    return page


async def say(page: Page, text: str) -> None:
    await page.fill("#say", text)
    await page.press("#say", "Enter")


async def test_two_tabs_one_session_calls_land_in_their_tab_and_the_console_follows(
    served: tuple[str, str], browser: Browser
) -> None:
    url, key = served
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    first = await demo_tab(context, f"{url}/demo#key={key}", "web")
    session_id = first.url.split("session=")[1]
    second = await demo_tab(context, first.url, "web-2")

    console = await context.new_page()
    await console.goto(f"{url}/console#key={key}")
    await console.locator("#session-rows tr.clickable").first.click()
    await expect(console.locator("#crumb")).to_contain_text(session_id)
    await expect(console.locator('#clients [data-client="web-2"]')).to_be_visible()

    # A call to web-2 changes the second tab only; both tabs and the console show it.
    await say(first, '/call client__web-2__highlight_row {"row_id": "4"}')
    await expect(second.locator('#rows tr.highlighted[data-row-id="4"]')).to_be_visible()
    await expect(first.locator("#rows tr.highlighted")).to_have_count(0)
    answered = console.locator(".call.answered", has_text="highlight_row")
    await expect(answered).to_contain_text("by web-2")
    await expect(answered).to_contain_text("row 4 (Omar Haddad) is highlighted")
    await expect(first.locator("#transcript")).to_contain_text("client__web-2__highlight_row: row 4")

    # Page tools: the form in the first tab is filled and submitted by the model's calls.
    fields = '[{"label": "Customer", "value": "Kenji Mori"}, {"name": "tone", "value": "Firm"}]'
    fill = f'/call client__web__fill_form {{"fields": {fields}}}'
    await say(second, fill)
    await expect(first.locator('input[name="customer"]')).to_have_value("Kenji Mori")
    await expect(first.locator('select[name="tone"]')).to_have_value("firm")
    await say(second, '/call client__web__submit_form {"form": "reminder"}')
    await expect(first.locator("#submitted")).to_have_text("Reminder for Kenji Mori (firm) sent.")
    await expect(console.locator(".call.answered", has_text="submit_form")).to_contain_text("submitted form")

    # A tool that throws answers with an error the model reads.
    await say(first, '/call client__web__highlight_row {"row_id": "99"}')
    await expect(console.locator(".call.error", has_text="highlight_row")).to_contain_text("there is no row 99")

    # A call the second tab acked and is still running when the tab closes: client_gone, then client_left.
    never = "() => { window.switchboardDemo.tab.tools.highlight_row.execute = () => new Promise(() => {}); }"
    await second.evaluate(never)
    await say(first, '/call client__web-2__highlight_row {"row_id": "1"}')
    await expect(console.locator(".call.acked", has_text="highlight_row")).to_be_visible()
    await second.close(run_before_unload=True)
    await expect(console.locator(".call.failed", has_text="highlight_row")).to_contain_text("client_gone")
    await expect(console.locator("#transcript")).to_contain_text("client web-2")
    await expect(console.locator("#transcript")).to_contain_text("left (departed)")
    await expect(console.locator('#clients [data-client="web-2"]')).to_have_count(0)

    # A reload leaves and registers again, under the same name (it is free again).
    registrations = await console.locator("#transcript .note", has_text="client web (").count()
    await first.reload()
    await expect(first.locator("body")).to_have_attribute("data-client", "web", timeout=15_000)
    await expect(console.locator("#transcript .note", has_text="client web (")).to_have_count(registrations + 1)
    await expect(console.locator("#transcript .note", has_text="client web left (departed)")).to_have_count(1)
    await expect(console.locator('#clients [data-client="web"]')).to_be_visible()
    await say(first, '/call client__web__highlight_row {"row_id": "3"}')
    await expect(first.locator('#rows tr.highlighted[data-row-id="3"]')).to_be_visible()
    await context.close()


async def test_the_console_refuses_a_bad_credential_and_a_token_sees_only_its_session(
    served: tuple[str, str], browser: Browser
) -> None:
    url, key = served
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    demo = await demo_tab(context, f"{url}/demo#key={key}", "web")
    session_id = demo.url.split("session=")[1]
    token = await demo.evaluate(f"localStorage.getItem('switchboard.demo.token.{session_id}')")
    console = await context.new_page()
    await console.goto(f"{url}/console")
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
    await context.close()
