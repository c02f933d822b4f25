"""The callback an MCP grant's authorization server sends the person's browser back to: a sign-in begun
(as a worker begins one: PKCE, `resource`, the flow sealed in the pending record) against a local
authorization server made of the `mcp` package's own server-side pieces, the test playing the browser."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
import pytest
from mcp.client.auth import PKCEParameters
from mcp.shared.auth import OAuthMetadata
from pydantic import SecretStr

from broker.broker import Broker
from broker.services.mcp_authorizations import AuthorizationFlow
from broker.services.mcp_connections import owner_of
from broker.services.token_cipher import TokenCipher
from common import token_endpoint
from switchboard.settings import Settings
from tests.api_client import Api, Session, running_api
from tests.oauth_server import CLIENT_ID, MemoryAuthorizationServer, authorization_server

pytestmark = pytest.mark.private_providers

PUBLIC_URL = "http://switchboard.test"
CALLBACK = PUBLIC_URL + "/v1/mcp/oauth/callback"
SERVER = "http://127.0.0.1:9/mcp"
SECRET = secrets.token_urlsafe(32)


@dataclass
class SignIn:
    session: Session
    state: str
    authorization_id: str
    url: str


@pytest.fixture
async def api(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    update: dict[str, object] = {"secret_key": SecretStr(SECRET), "public_url": PUBLIC_URL}
    async with running_api(settings, redis_url, api_key, update, worker=False) as running:
        yield running


@pytest.fixture
async def server() -> AsyncIterator[MemoryAuthorizationServer]:
    async with authorization_server(CALLBACK, scopes=["read", "write"]) as running:
        yield running


@pytest.fixture
def cipher() -> TokenCipher:
    return TokenCipher(SecretStr(SECRET))


async def begin(
    api: Api,
    broker: Broker[Settings],
    server: MemoryAuthorizationServer,
    *,
    wait_s: int = 60,
    metadata: dict[str, Any] | None = None,
    session: Session | None = None,
) -> SignIn:
    """A sign-in begun as the worker begins one; the authorization URL the person is given."""
    session = session or await api.session()
    async with httpx.AsyncClient() as http:
        found = await http.get(server.issuer + "/.well-known/oauth-authorization-server")
    document = OAuthMetadata.model_validate({**found.json(), **(metadata or {})})
    pkce = PKCEParameters.generate()
    flow = AuthorizationFlow(
        metadata=document.model_dump(mode="json", exclude_none=True),
        client=server.clients[CLIENT_ID].model_dump(mode="json", exclude_none=True),
        code_verifier=pkce.code_verifier,
        redirect_uri=CALLBACK,
        resource=SERVER,
        scope="read",
        subject=None,
    )
    authorization_id = str(uuid.uuid4())
    state, _ = await broker.mcp_authorizations.begin(
        authorization_id=authorization_id,
        session_id=session.id,
        grant="notes",
        server_url=SERVER,
        flow=flow.seal(TokenCipher(SecretStr(SECRET)), authorization_id),
        wait_s=wait_s,
    )
    query = {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": CALLBACK,
        "state": state,
        "code_challenge": pkce.code_challenge,
        "code_challenge_method": "S256",
        "resource": SERVER,
        "scope": "read",
    }
    return SignIn(session, state, authorization_id, f"{document.authorization_endpoint}?{urlencode(query)}")


async def redirected(url: str) -> str:
    """Where the authorization server sends the browser back (it signs the person in at once)."""
    async with httpx.AsyncClient() as browser:
        answer = await browser.get(url)
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert location.startswith(CALLBACK + "?"), location
    return location


async def open_callback(api: Api, location: str) -> httpx.Response:
    """The browser following `location` (under the public URL) to the API that serves it."""
    parts = urlsplit(location)
    base = urlsplit(str(api.key.base_url))
    async with httpx.AsyncClient() as browser:
        return await browser.get(urlunsplit((base.scheme, base.netloc, parts.path, parts.query, "")))


async def extensions(api: Api, session: Session, include: bool = True) -> list[dict[str, Any]]:
    params: dict[str, str | int] = {"order": "asc", "limit": 200}
    if include:
        params["include"] = "extensions"
    answer = await api.key.get(f"/v1/sessions/{session.id}/events", params=params)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


async def connections(api: Api, session: Session) -> list[dict[str, Any]]:
    listed = await api.key.get("/v1/mcp/connections", params={"session_id": session.id})
    assert listed.status_code == 200, listed.text
    items: list[dict[str, Any]] = listed.json()["items"]
    return items


async def test_the_code_is_exchanged_and_the_tokens_kept_for_the_session(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, cipher: TokenCipher
) -> None:
    sign_in = await begin(api, broker, server)
    page = await open_callback(api, await redirected(sign_in.url))
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert "close this tab" in page.text
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "no-referrer"
    # The authorization server was asked with the verifier (its PKCE check passed) for the grant's server.
    (exchanged,) = server.exchanged
    assert exchanged.resource == SERVER
    assert exchanged.scopes == ["read"]
    (connection,) = await connections(api, sign_in.session)
    assert (connection["grant"], connection["server_url"], connection["scopes"]) == ("notes", SERVER, ["read"])
    assert connection["session_id"] == sign_in.session.id
    assert connection["expires_at"] is not None
    stored = await broker.mcp_connections.tokens(cipher, owner_of(None, sign_in.session.id), SERVER)
    assert stored is not None
    assert [token for token in server.access if token.encode() in stored] == list(server.access)
    completed = [e for e in await extensions(api, sign_in.session) if e["type"] == "mcp_authorization_completed"]
    assert [(e["authorization_id"], e["grant"], e["server_url"]) for e in completed] == [
        (sign_in.authorization_id, "notes", SERVER)
    ]
    # An extension: a reader that does not ask does not see it.
    assert "mcp_authorization_completed" not in {e["type"] for e in await extensions(api, sign_in.session, False)}


async def test_a_state_works_once_and_a_strangers_or_a_lapsed_one_not_at_all(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    sign_in = await begin(api, broker, server)
    location = await redirected(sign_in.url)
    assert (await open_callback(api, location)).status_code == 200
    replayed = await open_callback(api, location)
    assert replayed.status_code == 400
    assert "used already" in replayed.text
    assert len(server.exchanged) == 1

    stranger = location.replace(sign_in.state, secrets.token_urlsafe(32))
    refused = await open_callback(api, stranger)
    assert refused.status_code == 400
    assert "not one Switchboard made" in refused.text

    lapsed = await begin(api, broker, server, wait_s=1)
    location = await redirected(lapsed.url)
    await asyncio.sleep(1.1)
    late = await open_callback(api, location)
    assert late.status_code == 400
    assert "ran out" in late.text
    assert len(server.exchanged) == 1
    assert await connections(api, lapsed.session) == []
    assert "mcp_authorization_completed" not in {e["type"] for e in await extensions(api, lapsed.session)}


async def test_an_answer_from_another_issuer_is_refused_before_the_code_is_used(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    server.iss = "https://issuer.example"
    sign_in = await begin(api, broker, server)
    page = await open_callback(api, await redirected(sign_in.url))
    assert page.status_code == 400
    assert "iss mismatch" in page.text
    assert server.exchanged == []
    assert await connections(api, sign_in.session) == []


async def test_a_server_that_promises_iss_must_send_it(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    sign_in = await begin(api, broker, server, metadata={"authorization_response_iss_parameter_supported": True})
    location = await redirected(sign_in.url)
    parts = urlsplit(location)
    without = "&".join(p for p in parts.query.split("&") if not p.startswith("iss="))
    page = await open_callback(api, urlunsplit(parts._replace(query=without)))
    assert page.status_code == 400
    assert "missing iss" in page.text
    assert server.exchanged == []


async def test_a_refusal_from_the_authorization_server_is_shown_and_spends_the_state(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    sign_in = await begin(api, broker, server)
    query = urlencode({"state": sign_in.state, "error": "access_denied", "error_description": "<b>no</b>"})
    page = await open_callback(api, f"{CALLBACK}?{query}")
    assert page.status_code == 400
    assert "access_denied" in page.text
    assert "&lt;b&gt;no&lt;/b&gt;" in page.text
    assert "<b>" not in page.text
    again = await open_callback(api, await redirected(sign_in.url))
    assert again.status_code == 400
    assert "used already" in again.text
    assert await connections(api, sign_in.session) == []


async def test_a_token_endpoint_that_never_answers_is_given_up_on(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(token_endpoint, "EXCHANGE_TIMEOUT_S", 0.5)
    sign_in = await begin(api, broker, server, metadata={"token_endpoint": server.issuer + "/never"})
    location = await redirected(sign_in.url)
    started = time.monotonic()
    page = await open_callback(api, location)
    assert time.monotonic() - started < 3
    assert page.status_code == 400
    assert "did not answer within 0.5 s" in page.text
    assert await connections(api, sign_in.session) == []
    # The API went on serving meanwhile, and still does.
    assert (await api.key.get("/healthz")).status_code == 200


async def test_a_token_endpoint_that_answers_too_much_is_refused(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    sign_in = await begin(api, broker, server, metadata={"token_endpoint": server.issuer + "/huge"})
    page = await open_callback(api, await redirected(sign_in.url))
    assert page.status_code == 400
    assert "answered more than 65536 bytes" in page.text
    assert await connections(api, sign_in.session) == []


async def test_a_sign_in_for_a_session_that_is_gone_keeps_nothing(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    sign_in = await begin(api, broker, server)
    location = await redirected(sign_in.url)
    assert (await api.key.delete(f"/v1/sessions/{sign_in.session.id}")).status_code == 204
    page = await open_callback(api, location)
    assert page.status_code == 400
    assert "the session this sign-in was for is gone" in page.text
    assert server.exchanged == []


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({}, "state: missing"),
        ({"state": "s" * 513}, "state: at most 512 characters"),
        ({"state": "s", "code": "c" * 4097}, "code: at most 4096 characters"),
        ({"state": "s", "iss": "i" * 2049}, "iss: at most 2048 characters"),
        ({"state": "s", "error_description": "d" * 1025}, "error_description: at most 1024 characters"),
    ],
)
async def test_bad_callback_parameters_are_refused_naming_the_field(api: Api, query: dict[str, str], said: str) -> None:
    page = await open_callback(api, f"{CALLBACK}?{urlencode(query)}")
    assert page.status_code == 400
    assert said in page.text


async def test_a_parameter_given_twice_is_refused(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    sign_in = await begin(api, broker, server)
    location = await redirected(sign_in.url)
    page = await open_callback(api, location + "&code=another")
    assert page.status_code == 400
    assert "code: given more than once" in page.text
    # The state was not looked at: the real answer still completes.
    assert (await open_callback(api, location)).status_code == 200


async def test_a_token_endpoint_at_a_private_address_is_refused_where_they_are_not_allowed(
    settings: Settings, redis_url: str, api_key: str, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    update: dict[str, object] = {
        "secret_key": SecretStr(SECRET),
        "public_url": PUBLIC_URL,
        "provider_allow_private": False,
    }
    async with running_api(settings, redis_url, api_key, update, worker=False) as strict:
        sign_in = await begin(strict, broker, server)
        page = await open_callback(strict, await redirected(sign_in.url))
        assert page.status_code == 400
        assert "a loopback address" in page.text
        assert server.exchanged == []
        assert await connections(strict, sign_in.session) == []
