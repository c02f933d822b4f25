"""What the browser tests share: Debian's chromium through Playwright (the tests skip without it), a demo
tab that has joined its session, and input typed into a page's box."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from tests.e2e.served import Served, api_and_worker

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HAVE_CHROMIUM = Path(CHROMIUM).exists()


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A launched chromium, closed after the block; the test skips where there is none."""
    if not HAVE_CHROMIUM:
        pytest.skip(f"no chromium at {CHROMIUM}: `.ci/run` installs Debian's chromium package")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            yield launched
        finally:
            await launched.close()


def served_for_browser(redis_url: str, logs: Path) -> Iterator[Served]:
    """An API and a worker with call deadlines long enough for a browser that is slow to start."""
    with api_and_worker(redis_url, logs, ack_timeout_s="20", result_timeout_s="20") as running:
        yield running


async def demo_tab(context: BrowserContext, url: str, name: str) -> Page:
    """A demo page at `url`, once its tab is registered as client `name`, with no script error on the way."""
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
