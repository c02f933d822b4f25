"""A sign-in to an OAuth grant's MCP server as both front doors show it, driven by the real clients in Node
(`@ag-ui/client`'s HttpAgent, the `ai` package's DefaultChatTransport and readUIMessageStream): while a run's
step waits on the sign-in, the person signs in through the `mcp` package's own authorization server (the test
plays the browser) and the stream shows the link, then the sign-in completed, without ending the run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from switchboard.settings import Settings
from tests.api.test_mcp_oauth_callback import CALLBACK, PUBLIC_URL, SECRET, extensions, open_callback, redirected
from tests.api.test_mcp_oauth_sign_in import oauth_grant
from tests.api_client import Api, Session, running_api
from tests.js_clients import drive
from tests.oauth_server import MemoryAuthorizationServer, authorization_server

pytestmark = pytest.mark.private_providers

# The model sleeps in the step that asked for the sign-in, so it ends while the run still goes on.
ASKS = '/sleep 4\n/call mcp__notes__note {"text": "hi"}'


@pytest.fixture
async def signing(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    update: dict[str, object] = {"secret_key": SecretStr(SECRET), "public_url": PUBLIC_URL}
    async with running_api(settings, redis_url, api_key, update) as api:
        yield api


@pytest.fixture
async def server() -> AsyncIterator[MemoryAuthorizationServer]:
    async with authorization_server(CALLBACK, scopes=["notes:read"], method="client_secret_basic") as running:
        yield running


async def person_signs_in(api: Api, session: Session) -> dict[str, Any]:
    """Waits for the session to ask, then signs in as the person's browser would; the request event."""
    for _ in range(500):
        asked = [e for e in await extensions(api, session) if e["type"] == "mcp_authorization_required"]
        if asked:
            page = await open_callback(api, await redirected(asked[0]["authorization_url"]))
            assert page.status_code == 200, page.text
            return asked[0]
        await asyncio.sleep(0.02)
    raise AssertionError("the session never asked for a sign-in")


@pytest.mark.parametrize("proto", [False, True])
async def test_ag_ui_shows_the_link_and_the_completed_sign_in_as_custom_events(
    signing: Api, server: MemoryAuthorizationServer, proto: bool
) -> None:
    session = await signing.session(mcp=[oauth_grant(server)])
    plan = {
        "url": f"{signing.stack.url}/v1/sessions/{session.id}/ag-ui",
        "token": session.token,
        "threadId": "thread-1",
        "runs": [{"add": [{"id": "u1", "role": "user", "content": ASKS}]}],
        "proto": proto,
    }
    (run,), asked = await asyncio.gather(drive("ag_ui_driver.mjs", plan), person_signs_in(signing, session))
    custom = [(e["name"], e["value"]) for e in run["events"] if e["type"] == "CUSTOM"]
    base = {"authorization_id": asked["authorization_id"], "grant": "notes", "server_url": server.issuer + "/mcp"}
    link = {"authorization_url": asked["authorization_url"], "expires_at": asked["expires_at"]}
    assert custom == [
        ("switchboard.mcp_authorization_required", {**base, **link}),
        ("switchboard.mcp_authorization_completed", base),
    ]
    # Shown while the run went on: it ends as usual, after both.
    assert run["finished"] == {"type": "success"}
    assert run["error"] is None
    types = [e["type"] for e in run["events"]]
    assert types.index("CUSTOM") > types.index("RUN_STARTED")
    assert types[-1] == "RUN_FINISHED"


async def test_ai_sdk_shows_the_link_as_a_data_part_that_the_completed_sign_in_replaces(
    signing: Api, server: MemoryAuthorizationServer
) -> None:
    session = await signing.session(mcp=[oauth_grant(server)])
    plan = {
        "api": f"{signing.stack.url}/v1/sessions/{session.id}/ai-sdk/chat",
        "token": session.token,
        "chatId": "chat-1",
        "runs": [{"send": ASKS}],
    }
    (run,), asked = await asyncio.gather(drive("ai_sdk_driver.mjs", plan), person_signs_in(signing, session))
    assert run["error"] is None
    chunks = [c for c in run["chunks"] if c["type"] == "data-mcp-authorization"]
    base = {"authorization_id": asked["authorization_id"], "grant": "notes", "server_url": server.issuer + "/mcp"}
    link = {"authorization_url": asked["authorization_url"], "expires_at": asked["expires_at"]}
    assert [(c["id"], c["data"]) for c in chunks] == [
        (asked["authorization_id"], {**base, "state": "required", **link}),
        (asked["authorization_id"], {**base, "state": "completed"}),
    ]
    # The SDK reconciled the second into the first: one part, in its latest state.
    (part,) = [p for p in run["message"]["parts"] if p["type"] == "data-mcp-authorization"]
    assert part["data"] == {**base, "state": "completed"}
    assert run["chunks"][-1]["type"] == "finish"
