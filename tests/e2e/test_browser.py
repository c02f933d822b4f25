"""The demo and the console in a real browser (Playwright with Debian's chromium): two tabs of one session,
calls landing in the right tab, the console following along, a tab closed and a tab reloaded (the
console's own ways and the API's pages: tests/e2e/test_browser_console.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, expect

from tests.e2e.browser import demo_tab, say, served_for_browser
from tests.e2e.served import Served

pytestmark = [pytest.mark.processes, pytest.mark.browser, pytest.mark.timeout(120)]


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[Served]:
    yield from served_for_browser(redis_url, tmp_path / "logs")


async def test_two_tabs_one_session_calls_land_in_their_tab_and_the_console_follows(
    served: Served, browser: Browser
) -> None:
    url, key = served.url, served.key
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


ADD_GO_TOOL = """() => {
  const tab = window.switchboardDemo.tab;
  const extra = { description: "Added by go", parameters: { type: "object" }, execute: () => "extra" };
  const go = {
    description: "Adds a tool, then answers",
    parameters: { type: "object" },
    execute: () => { tab.setTools({ ...tab.tools, extra }); return "went"; },
  };
  window.seenSeqs = [];
  window.switchboardDemo.live.on("*", (event) => window.seenSeqs.push(event.seq));
  return tab.setTools({ ...tab.tools, go }).then(() => tab.id);
}"""

STOP_PINGING = """() => {
  const tab = window.switchboardDemo.tab;
  clearTimeout(tab._pinging);
  tab._schedulePing = () => {};
}"""


async def test_the_sdk_orders_tool_changes_resumes_across_an_api_restart_and_registers_again_after_a_lapse(
    served: Served, browser: Browser
) -> None:
    context = await browser.new_context()
    tab = await demo_tab(context, f"{served.url}/demo?ttl=5#key={served.key}", "web")
    session_id = tab.url.split("session=")[1]

    # A tool change a handler makes reaches the server before that handler's result does.
    await tab.evaluate(ADD_GO_TOOL)
    await say(tab, "/call client__web__go")
    await expect(tab.locator("#transcript")).to_contain_text("client__web__go: went")
    async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.key}"}) as admin:
        page = await admin.get(f"/v1/sessions/{session_id}/events", params={"order": "desc", "limit": 100})
    events = list(reversed(page.json()["items"]))
    [dispatched] = [e for e in events if e["type"] == "client_tool_dispatched" and e["tool"] == "go"]
    [result] = [e for e in events if e["type"] == "tool_result" and e["call_id"] == dispatched["call_id"]]
    updates = [e for e in events if e["type"] == "client_tools_updated" and "extra" in [t["name"] for t in e["tools"]]]
    assert updates, [e["type"] for e in events]
    assert updates[0]["seq"] < result["seq"]

    # The API dies under the open stream: the tab reconnects with Last-Event-ID, misses nothing, repeats nothing.
    served.restart_api()
    await expect(tab.locator("#status")).to_have_text("open", timeout=20_000)
    await say(tab, '/call client__web__highlight_row {"row_id": "5"}')
    await expect(tab.locator('#rows tr.highlighted[data-row-id="5"]')).to_be_visible(timeout=15_000)
    await expect(tab.locator("#transcript")).to_contain_text("client__web__highlight_row: row 5")
    seqs: list[int] = await tab.evaluate("window.seenSeqs")
    async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.key}"}) as admin:
        params: dict[str, str | int] = {"order": "asc", "limit": 100, "after_seq": seqs[0] - 1}
        logged = [
            e["seq"] for e in (await admin.get(f"/v1/sessions/{session_id}/events", params=params)).json()["items"]
        ]
    assert seqs == logged[: len(seqs)], (seqs, logged)  # every event the log shows readers, once, in order

    # The tab stops pinging (frozen, say): the server lapses it, and the tab registers again by itself.
    before = await tab.locator("body").get_attribute("data-client-id")
    await tab.evaluate(STOP_PINGING)
    await expect(tab.locator("body")).not_to_have_attribute("data-client-id", before or "", timeout=20_000)
    await expect(tab.locator("#transcript")).to_contain_text("left: web (timed_out)")
    await say(tab, '/call client__web__highlight_row {"row_id": "1"}')
    await expect(tab.locator('#rows tr.highlighted[data-row-id="1"]')).to_be_visible()
    await context.close()


async def test_page_tools_read_highlight_click_and_navigate(served: Served, browser: Browser) -> None:
    context = await browser.new_context()
    tab = await demo_tab(context, f"{served.url}/demo#key={served.key}", "web")
    transcript = tab.locator("#transcript")

    await say(tab, '/call client__web__read_page {"max_chars": 200}')
    await expect(transcript).to_contain_text('client__web__read_page: {"title":"Switchboard demo"')
    await expect(transcript).to_contain_text('"truncated":true')

    await say(tab, '/call client__web__highlight {"text": "Omar Haddad"}')
    await expect(transcript).to_contain_text('client__web__highlight: highlighted td "omar haddad"')

    await tab.fill('input[name="customer"]', "Sara Lind")
    await say(tab, '/call client__web__click {"text": "Send reminder"}')
    await expect(tab.locator("#submitted")).to_have_text("Reminder for Sara Lind (friendly) sent.")
    await say(tab, '/call client__web__click {"text": "Pay everything"}')
    await expect(transcript).to_contain_text('client__web__click failed: no button or link "Pay everything"')

    await say(tab, '/call client__web__navigate {"url": "https://elsewhere.example/"}')
    await expect(transcript).to_contain_text("client__web__navigate failed: only pages of")
    # A same-site navigation answers first (its result outlives the page), then the tab loads the page,
    # which joins the session again.
    target = f"/demo?session={tab.url.split('session=')[1]}&from=agent"
    async with tab.expect_navigation():
        await say(tab, f'/call client__web__navigate {{"url": "{target}"}}')
    await expect(tab.locator("body")).to_have_attribute("data-client", "web", timeout=15_000)
    assert tab.url.endswith("&from=agent")
    await expect(transcript).to_contain_text(f"client__web__navigate: opening {target}")
    await context.close()


RENEWING_CONNECTION = """async ([sessionId, token]) => {
  const { connect } = await import("/sdk/switchboard.js");
  const asked = [];
  const getToken = async () => {
    asked.push(Date.now());
    return asked.length === 1 ? "swb_st_" + "0".repeat(32) + "stale" : token;
  };
  const live = connect({ sessionId, getToken });
  await live.ready();
  const afterStream = asked.length;
  live._token = "swb_st_" + "0".repeat(32) + "expired";  // the token expires while the page is open
  await live.send("token renewed");
  const afterSend = asked.length;
  live._abort.abort();
  return [afterStream, afterSend];
}"""


async def test_a_token_getter_is_asked_again_after_a_401(served: Served, browser: Browser) -> None:
    context = await browser.new_context()
    tab = await demo_tab(context, f"{served.url}/demo#key={served.key}", "web")
    session_id = tab.url.split("session=")[1]
    token = await tab.evaluate(f"localStorage.getItem('switchboard.demo.token.{session_id}')")
    after_stream, after_send = await tab.evaluate(RENEWING_CONNECTION, [session_id, token])
    assert (after_stream, after_send) == (2, 3)  # once more for the stream's 401, once more for the send's
    await expect(tab.locator("#transcript")).to_contain_text("You said: token renewed")
    await context.close()


# A 1x1 PNG (one red pixel).
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="

ADD_TOOLS = """(pixel) => {
  const tab = window.switchboardDemo.tab;
  window.aborted = null;
  const slow = {
    description: "Takes its time",
    parameters: { type: "object" },
    execute: (args, call) => {
      call.progress("halfway", 0.5);
      return new Promise((resolve) => call.signal.addEventListener("abort", () => {
        window.aborted = call.signal.reason.message;
        resolve("ignored");
      }));
    },
  };
  const snap = {
    description: "A picture",
    parameters: { type: "object" },
    execute: () => ({
      content: [{ type: "text", text: "a dot" }, { type: "image", media_type: "image/png", data: pixel }],
    }),
  };
  return tab.setTools({ ...tab.tools, slow, snap });
}"""

PER_TURN = """() => window.switchboardDemo.live.send("/call lookup", {
  clientTools: {
    lookup: {
      description: "Looks up",
      parameters: { type: "object" },
      execute: (args, call) => `found ${call.callId.slice(0, 5)}`,
    },
  },
})"""


async def test_progress_cancel_images_and_per_turn_tools_in_the_browser(served: Served, browser: Browser) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    tab = await demo_tab(context, f"{served.url}/demo#key={served.key}", "web")
    session_id = tab.url.split("session=")[1]
    await tab.evaluate(ADD_TOOLS, PIXEL)
    console = await context.new_page()
    console.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await console.goto(f"{served.url}/console#key={served.key}&session={session_id}")
    await expect(console.locator("#conn")).to_have_text("open")

    # Progress reaches the console's card; the console's Cancel reaches `execute` as an aborted signal.
    await say(tab, "/call client__web__slow")
    card = console.locator(".call", has_text="slow")
    await expect(card.locator(".progress")).to_have_text("progress: 50% · halfway")
    await card.get_by_role("button", name="Cancel call").click()
    await expect(console.locator(".call.failed", has_text="slow")).to_contain_text("run_gone (cancelled)")
    assert await tab.evaluate("window.aborted") == "the call failed: run_gone (cancelled)"
    await expect(tab.locator("#transcript")).to_contain_text("client__web__slow failed: the call was cancelled")

    # An image result is shown as an image in the console, as a text block naming it to the SDK's view.
    await say(tab, "/call client__web__snap")
    await expect(console.locator(".call.answered", has_text="snap").locator("img.result-image")).to_be_visible()
    await expect(tab.locator("#transcript")).to_contain_text("client__web__snap: a dot")

    # The page tools' screenshot: a PNG of the table, also shown in the console.
    await say(tab, '/call client__web__screenshot {"selector": "#rows"}')
    shot = console.locator(".call.answered", has_text="screenshot")
    await expect(shot.locator("img.result-image")).to_be_visible()
    await expect(shot).to_contain_text("a picture of")

    # Per-turn tools given to send() are served by the page that sent them.
    await tab.evaluate(PER_TURN)
    await expect(tab.locator("#transcript")).to_contain_text("lookup: found call_")
    await context.close()


async def test_the_printed_demo_link_opened_again_joins_its_session_as_web_2(served: Served, browser: Browser) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    printed = f"{served.url}/demo#key={served.key}"  # the link `switchboard up` prints
    first = await demo_tab(context, printed, "web")
    session_id = first.url.split("session=")[1]
    again = await demo_tab(context, printed, "web-2")
    assert again.url.split("session=")[1] == session_id
    # New session starts another; the printed link joins that one from then on.
    await again.locator("#new-session").click()
    await expect(again.locator("body")).to_have_attribute("data-client", "web", timeout=15_000)
    other = again.url.split("session=")[1]
    assert other not in (session_id, "")
    third = await demo_tab(context, printed, "web-2")
    assert third.url.split("session=")[1] == other
    # A remembered session that is gone is not joined: the link starts a new one.
    await third.close()
    await again.close()
    async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.key}"}) as admin:
        assert (await admin.delete(f"/v1/sessions/{other}")).status_code in (200, 204)
    fourth = await demo_tab(context, printed, "web")
    assert fourth.url.split("session=")[1] not in (session_id, other)
    await context.close()
