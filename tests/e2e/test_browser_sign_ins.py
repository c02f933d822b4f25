"""The console's Sign-ins panel in a real browser (Playwright with Debian's chromium), against API and worker
processes and the `mcp` package's own authorization server (tests/oauth_server.py, served by this test's
loop): a step asks for a sign-in, the console shows the grant, the server and a "Sign in" link opening a new
tab with no opener or referrer; clicking it signs the person in for real (the authorization server sends the
new tab to the API's callback) and the card goes; Decline posts the decline; and a hostile link on the
stream is never made a link, nor is markup in an event parsed."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from playwright.async_api import Browser, Dialog, Route, expect

from switchboard.processes import Processes
from tests.e2e.served import scripted_session
from tests.e2e.signing_stack import server, stack
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET, MemoryAuthorizationServer

__all__ = ["server", "stack"]

pytestmark = [pytest.mark.processes, pytest.mark.browser, pytest.mark.timeout(120)]

CALL = '/call mcp__notes__note {"text": "hi"}'


async def asking_session(stack: tuple[Processes, str], server: MemoryAuthorizationServer) -> tuple[str, str]:
    """A session whose agent has an OAuth grant to `server`, its first step asking for the sign-in."""
    processes, url = stack
    auth = {"type": "oauth", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    grant = {"name": "notes", "url": server.issuer + "/mcp", "default_policy": "allow", "auth": auth}
    session_id, token = await scripted_session(url, processes.env["TEST_API_KEY"], "signing", mcp=[grant])
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as app:
        sent = await app.post(f"/v1/sessions/{session_id}/events", json={"type": "input", "text": CALL})
        assert sent.status_code == 200, sent.text
    return session_id, token


async def asked(url: str, token: str, session_id: str) -> dict[str, object]:
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as app:
        for _ in range(500):
            page = await app.get(f"/v1/sessions/{session_id}/events", params={"include": "extensions", "limit": 200})
            found = [e for e in page.json()["items"] if e["type"] == "mcp_authorization_required"]
            if found:
                return dict(found[0])
            await asyncio.sleep(0.02)
    raise AssertionError("the session never asked for a sign-in")


async def test_the_sign_in_link_opens_a_tab_that_signs_in_and_the_card_goes(
    stack: tuple[Processes, str], server: MemoryAuthorizationServer, browser: Browser
) -> None:
    processes, url = stack
    session_id, token = await asking_session(stack, server)
    event = await asked(url, token, session_id)
    context = await browser.new_context()
    console = await context.new_page()
    await console.goto(f"{url}/console#key={processes.env['TEST_API_KEY']}&session={session_id}")
    card = console.locator(f'#mcp-signins [data-authorization="{event["authorization_id"]}"]')
    await expect(card).to_contain_text("notes")
    await expect(card).to_contain_text(server.issuer + "/mcp")
    link = card.get_by_role("link", name="Sign in")
    assert await link.get_attribute("href") == event["authorization_url"]
    assert await link.get_attribute("target") == "_blank"
    assert await link.get_attribute("rel") == "noopener noreferrer"
    await expect(console.locator("#mcp-signin-count")).to_have_text("1")
    async with context.expect_page() as opened:
        await link.click()
    tab = await opened.value
    await tab.wait_for_load_state()
    # The authorization server signed the person in and sent the tab to the API's callback.
    await expect(tab.locator("body")).to_contain_text("close this tab")
    await expect(card).to_have_count(0)
    await expect(console.locator("#mcp-signins")).to_have_text("None.")
    assert [code.client_id for code in server.exchanged] == [CLIENT_ID]
    await context.close()


async def test_decline_posts_the_decline_and_the_link_no_longer_signs_in(
    stack: tuple[Processes, str], server: MemoryAuthorizationServer, browser: Browser
) -> None:
    url = stack[1]
    session_id, token = await asking_session(stack, server)
    event = await asked(url, token, session_id)
    context = await browser.new_context()
    console = await context.new_page()
    # A session token signed in: the person's own view of the session.
    await console.goto(f"{url}/console")
    await console.fill('input[name="credential"]', token)
    await console.fill('input[name="session"]', session_id)
    await console.get_by_role("button", name="Sign in").click()
    card = console.locator(f'#mcp-signins [data-authorization="{event["authorization_id"]}"]')
    async with console.expect_response(lambda answer: answer.url.endswith("/decline")) as declined:
        await card.get_by_role("button", name="Decline").click()
    answer = await declined.value
    assert answer.status == 200
    assert (await answer.json())["state"] == "declined"
    async with httpx.AsyncClient() as other:
        sent = await other.get(str(event["authorization_url"]))
        page = await other.get(sent.headers["location"])
    assert page.status_code == 400
    assert "declined" in page.text
    assert server.exchanged == []
    await context.close()


@pytest.mark.parametrize(
    "hostile", ["javascript:alert(document.domain)", "data:text/html,<script>alert(1)</script>", "/v1/sessions"]
)
async def test_a_hostile_link_on_the_stream_is_never_a_link_and_markup_stays_text(
    stack: tuple[Processes, str], browser: Browser, hostile: str
) -> None:
    processes, url = stack
    session_id, _ = await scripted_session(url, processes.env["TEST_API_KEY"], "hostile")
    forged = {
        "type": "mcp_authorization_required",
        "seq": 1,
        "created_at": "2026-12-06T00:00:00Z",
        "authorization_id": "a-1",
        "grant": "<img src=x onerror=alert(1)>",
        "server_url": "<b>bold</b>",
        "authorization_url": hostile,
        "expires_at": "2099-01-01T00:00:00Z",
    }

    async def stream(route: Route) -> None:
        body = f"id: 1\ndata: {json.dumps(forged)}\n\n"
        await route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=body)

    context = await browser.new_context()
    console = await context.new_page()
    dialogs: list[str] = []

    async def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    console.on("dialog", dismiss)
    # The session's stream as a hostile or broken server might send it.
    await console.route("**/events/stream**", stream)
    await console.goto(f"{url}/console#key={processes.env['TEST_API_KEY']}&session={session_id}")
    card = console.locator('#mcp-signins [data-authorization="a-1"]')
    await expect(card).to_contain_text("<img src=x onerror=alert(1)>")
    await expect(card).to_contain_text("<b>bold</b>")
    await expect(card).to_contain_text("is not an http(s) address")
    # The card's own elements only: nothing the event carried became one.
    assert await card.locator("a, img, script, [href], [onerror]").count() == 0
    assert await card.locator("b > *, .mono > *").count() == 0
    await console.wait_for_timeout(200)
    assert dialogs == []
    await context.close()
