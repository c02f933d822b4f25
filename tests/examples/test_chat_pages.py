"""The React chat examples in Chromium, each on a page of its own origin, built with esbuild from the
lockfile's packages: examples/ai-sdk-chat (useChat, `@ai-sdk/react`, on the AI SDK door) and
examples/ag-ui-chat (`@ag-ui/client`'s HttpAgent on the AG-UI door). Each page's frontend tool runs in the
page and the same Switchboard run goes on."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.e2e.served import Served
from tests.examples.support import EXAMPLES, of_type, session_log, text_of
from tests.examples.test_page import browser, open_page, session_for, static_site
from tests.js_clients import ROOT, need_node_packages

pytestmark = [
    pytest.mark.processes,
    pytest.mark.browser,
    pytest.mark.timeout(120),
    pytest.mark.xdist_group("chat_pages"),
]
__all__ = ["browser"]


@pytest.fixture(scope="module", params=["ai-sdk-chat", "ag-ui-chat"])
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The example built as its index.html says, into a folder of its own, served on its own origin."""
    need_node_packages()
    app = EXAMPLES / str(request.param)
    folder = Path(tmp_path_factory.mktemp(str(request.param)))
    shutil.copy(app / "index.html", folder / "index.html")
    esbuild = ROOT / "node_modules" / ".bin" / "esbuild"
    built = subprocess.run(
        [str(esbuild), str(app / "app.tsx"), "--bundle", "--format=esm", "--jsx=automatic", "--minify",
         '--define:process.env.NODE_ENV="production"', f"--outfile={folder / 'app.js'}", "--log-level=warning"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    with static_site(folder) as origin:
        yield origin


async def test_the_chat_runs_its_frontend_tool_and_shows_the_answer(
    served: Served, site: str, browser: Browser
) -> None:
    sid, token = await session_for(served, [site])
    page, errors = await open_page(browser, f"{site}/#api={served.url}&session={sid}&token={token}")
    assert token not in page.url
    await expect(page.locator("#status")).to_have_attribute("data-state", "ready", timeout=15_000)
    await page.fill('input[name="text"]', "/call read_theme {}")
    await page.click('button[type="submit"]')
    answer = page.locator('.message[data-role="assistant"]').last
    await expect(answer).to_contain_text("read_theme: dark", timeout=15_000)
    await expect(page.locator("#status")).to_have_attribute("data-state", "ready")

    events = session_log(served, sid)
    assert len(of_type(events, "run_completed")) == 1
    (result,) = of_type(events, "tool_result")
    assert text_of(result) == "dark"
    assert not result["is_error"]
    assert not errors, errors
    await page.close()


async def test_the_page_without_a_session_says_what_it_needs(site: str, browser: Browser) -> None:
    page, errors = await open_page(browser, f"{site}/")
    await expect(page.locator("#status")).to_have_attribute("data-state", "failed", timeout=15_000)
    await expect(page.locator("#status")).to_contain_text("session=SESSION_ID")
    assert not errors, errors
    await page.close()


def test_the_chat_examples_type_check_against_the_locked_packages() -> None:
    need_node_packages()
    checked = subprocess.run(
        [str(ROOT / "node_modules" / ".bin" / "tsc"), "-p", str(EXAMPLES / "tsconfig.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
