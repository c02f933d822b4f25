"""The browser SDK's sign-ins (api/static/switchboard.js: onAuthorizationRequired, onAuthorizationEnded,
declineAuthorization), run in Node by tests/js/sdk_sign_in_driver.mjs against a served stack with a real
sign-in: the `mcp` package's own authorization server, the test playing the person's browser. The app is
given the link and the grant, hears the sign-in complete, or declines it (a second decline is a 409); a
link that is not http(s) is never handed to the app as one."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_door_sign_ins import ASKS, person_signs_in, server, signing
from tests.api.test_mcp_oauth_callback import extensions, open_callback, redirected
from tests.api.test_mcp_oauth_sign_in import oauth_grant
from tests.api_client import Api, Session
from tests.js_clients import NODE, drive, need_node_packages
from tests.oauth_server import MemoryAuthorizationServer

pytestmark = pytest.mark.private_providers

__all__ = ["server", "signing"]
SDK = Path(__file__).resolve().parents[2] / "api" / "static" / "switchboard.js"


def plan(api: Api, session: Session, **more: object) -> dict[str, Any]:
    return {"url": api.stack.url, "sessionId": session.id, "token": session.token, "include": "extensions", **more}


async def asked_in(api: Api, session: Session) -> dict[str, Any]:
    for _ in range(500):
        asked = [e for e in await extensions(api, session) if e["type"] == "mcp_authorization_required"]
        if asked:
            return asked[0]
        await asyncio.sleep(0.02)
    raise AssertionError("the session never asked for a sign-in")


async def test_the_app_is_given_the_link_and_hears_the_sign_in_complete(
    signing: Api, server: MemoryAuthorizationServer
) -> None:
    session = await signing.session(mcp=[oauth_grant(server)])
    driving = asyncio.create_task(drive("sdk_sign_in_driver.mjs", plan(signing, session)))
    await signing.send(session, ASKS)
    asked = await person_signs_in(signing, session)
    required, ended = await driving
    base = {"authorizationId": asked["authorization_id"], "grant": "notes", "serverUrl": server.issuer + "/mcp"}
    assert required == {
        "required": {
            **base,
            "authorizationUrl": asked["authorization_url"],
            "expiresAt": asked["expires_at"],
            "eventType": "mcp_authorization_required",
            "declines": True,
        }
    }
    assert ended == {"ended": {**base, "state": "completed", "eventType": "mcp_authorization_completed"}}


async def test_the_app_declines_and_the_link_no_longer_signs_in(
    signing: Api, server: MemoryAuthorizationServer
) -> None:
    session = await signing.session(mcp=[oauth_grant(server)])
    driving = asyncio.create_task(drive("sdk_sign_in_driver.mjs", plan(signing, session, decline=True)))
    await signing.send(session, ASKS)
    asked = await asked_in(signing, session)
    lines = await driving
    answers = [line for line in lines if "declined" in line or "again" in line]
    assert answers == [
        {"declined": {"authorization_id": asked["authorization_id"], "grant": "notes", "state": "declined"}},
        {"again": {"status": 409, "code": "conflict"}},
    ]
    # Where the server appends the decline (`mcp_authorization_declined`), the app hears it as the end.
    assert all(line["ended"]["state"] == "declined" for line in lines if "ended" in line)
    page = await open_callback(signing, await redirected(asked["authorization_url"]))
    assert page.status_code == 400
    assert "declined" in page.text


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "data:text/html,<script>alert(1)</script>", "/relative", "ftp://x.example/"]
)
def test_a_link_that_is_not_http_is_never_handed_to_the_app(url: str) -> None:
    need_node_packages()
    assert NODE is not None
    asked = {
        "type": "mcp_authorization_required",
        "seq": 3,
        "authorization_id": "a1",
        "grant": "notes",
        "server_url": "https://mcp.example/mcp",
        "authorization_url": url,
        "expires_at": "2099-01-01T00:00:00Z",
    }
    # The listener is given what the stream delivers; no server is needed to see what it is handed.
    script = f"""
        import {{ connect }} from {json.dumps(SDK.as_uri())};
        const session = connect({{ sessionId: "s1", token: "t", url: "http://127.0.0.1:9", maxReconnects: 0 }});
        session.onAuthorizationRequired((signIn) => console.log(JSON.stringify(signIn.authorizationUrl)));
        session._deliver({json.dumps(asked)});
        await session.close();
    """
    printed = subprocess.run(
        [NODE, "--input-type=module", "-e", script], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert json.loads(printed.splitlines()[0]) is None
