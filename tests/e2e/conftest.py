"""Fixtures of the browser tests (test_browser.py, test_browser_console.py, test_pages.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser

from tests.e2e.browser import chromium


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched
