"""Drives the real `subako` SDK, unchanged, through a session whose agent has an OAuth grant and whose person
signs in (run as `python -m tests.contract.sign_in_scenario` by tests/contract/test_sdk_sign_in.py under
Python 3.12, never imported by the suite).

The SDK follows the session from the first step, which asks for the sign-in, to a later one that calls the
grant's tool with the person's token. Its default view must take all of it without choking and without the
sign-in events (`mcp_authorization_required`, `mcp_authorization_completed`: extensions), which a raw reader
sees with `?include=extensions`. Prints one JSON line: `{"scenario", "ok", "detail"}`.
"""

from __future__ import annotations

import asyncio
import json
import os
import traceback
from typing import Any

import httpx
from subako import SubakoClient

from tests.contract.sdk_scenarios import KEY, URL, _all_events, _followed, _session_with, finished, last_text, until

GRANT = {
    "name": "notes",
    "url": os.environ["SWITCHBOARD_OAUTH_MCP_URL"],
    "default_policy": "allow",
    "auth": {
        "type": "oauth",
        "client_id": os.environ["SWITCHBOARD_OAUTH_CLIENT_ID"],
        "client_secret": os.environ["SWITCHBOARD_OAUTH_CLIENT_SECRET"],
    },
}
CALL = '/call mcp__notes__note {"text": "hi"}'
SIGN_INS = ("mcp_authorization_required", "mcp_authorization_completed", "mcp_authorization_declined")


async def _asked(token: str, base: str) -> dict[str, Any]:
    for _ in range(750):
        asked = [e for e in await _all_events(token, base, include="extensions") if e["type"] == SIGN_INS[0]]
        if asked:
            first: dict[str, Any] = asked[0]
            return first
        await asyncio.sleep(0.02)
    raise AssertionError("the session never asked for a sign-in")


async def _sign_in(authorization_url: str) -> None:
    """The person's browser: the authorization server signs them in at once and sends them back to the
    callback (under the API's public URL, which is the API's own here)."""
    async with httpx.AsyncClient() as browser:
        sent = await browser.get(authorization_url)
        assert sent.status_code == 302, sent.text
        page = await browser.get(sent.headers["location"])
    assert page.status_code == 200, page.text
    assert "close this tab" in page.text


async def sign_in_while_followed() -> str:
    async with SubakoClient(base_url=URL, api_key=KEY) as admin:
        session_id, token = await _session_with(admin, "signing in", mcp=[GRANT])
    base = f"/v1/sessions/{session_id}"
    async with _followed(session_id, token) as (_, connection):
        await connection.send(CALL)
        asked = await _asked(token, base)
        await _sign_in(asked["authorization_url"])
        # The step that asked goes on (with or without the tools, as the server parks it or not); the next
        # step has the person's token.
        await until(finished(connection), timeout=30)
        await connection.send(CALL)
        await until(finished(connection, 2), timeout=30)
        # The scripted model repeats the result: the tool's text, then its structured content.
        assert last_text(connection).startswith("mcp__notes__note: noted: hi"), last_text(connection)
        seen = [e.type for e in connection.events]
        assert not [kind for kind in seen if kind.startswith("mcp_authorization")], seen
    extended = [e for e in await _all_events(token, base, include="extensions") if e["type"] in SIGN_INS]
    assert [(e["type"], e["authorization_id"]) for e in extended] == [
        (SIGN_INS[0], asked["authorization_id"]),
        (SIGN_INS[1], asked["authorization_id"]),
    ], extended
    assert not [e for e in await _all_events(token, base) if e["type"] in SIGN_INS]
    async with SubakoClient(base_url=URL, api_key=token) as reader:
        listed = [e async for e in await reader.sessions.list_events(session_id)]
        assert not [e for e in listed if e.type in SIGN_INS]
        async with reader.sessions.connect(session_id, history=True) as again:
            await until(finished(again, 2))
            assert last_text(again) == last_text(connection)
    return "a sign-in asked and completed while the SDK followed; its tool ran with the person's token"


async def main() -> None:
    try:
        detail = await asyncio.wait_for(sign_in_while_followed(), timeout=90)
        print(json.dumps({"scenario": "sign_in_while_followed", "ok": True, "detail": detail}), flush=True)
    except BaseException:
        print(json.dumps({"scenario": "sign_in_while_followed", "ok": False, "detail": traceback.format_exc()}))


if __name__ == "__main__":
    asyncio.run(main())
