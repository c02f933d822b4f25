"""A sign-in from its start to the grant's tool running: the worker's side discovers the server's
authorization (the 401's challenge, its Protected Resource Metadata, the authorization server's metadata),
picks a client and records the flow; the test plays the person's browser through the `mcp` package's own
authorization server to Switchboard's callback; the token kept is then the one the protected server takes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp.shared.auth import OAuthToken
from pydantic import HttpUrl, SecretStr

from broker.broker import Broker
from broker.services.mcp_connections import owner_of
from broker.services.token_cipher import TokenCipher
from common.addresses import ProviderAddresses
from switchboard.settings import Settings
from tests.api.test_mcp_grants import answer, texts
from tests.api.test_mcp_oauth_callback import (
    CALLBACK,
    PUBLIC_URL,
    SECRET,
    api,
    connections,
    extensions,
    open_callback,
    redirected,
)
from tests.api_client import Api, Event, of_type, running_api
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET, MemoryAuthorizationServer, authorization_server
from tests.stack import serve_asgi
from workers.config import McpGrant, OAuthAuth
from workers.mcp.hub import McpHub
from workers.mcp.mapped import Mapped
from workers.mcp.sign_in import SignIns, SignInUnavailable

__all__ = ["api"]
pytestmark = pytest.mark.private_providers

LOCAL = ProviderAddresses(allow_private=True, timeout_s=5)


@pytest.fixture
async def server() -> AsyncIterator[MemoryAuthorizationServer]:
    # Registered to send its secret in a Basic header, which the worker picks where the server offers it.
    # Its resource metadata lists the scopes /mcp requires (the scope a sign-in asks for by default).
    scopes = ["notes:read", "notes:write"]
    async with authorization_server(
        CALLBACK, scopes=scopes, method="client_secret_basic", resource_scopes=scopes
    ) as running:
        yield running


def sign_ins(broker: Broker[Settings], addresses: ProviderAddresses = LOCAL) -> SignIns:
    cipher = TokenCipher(SecretStr(SECRET))
    return SignIns(broker.mcp_authorizations, cipher, addresses, HttpUrl(PUBLIC_URL), wait_s=60)


async def challenge(server: MemoryAuthorizationServer) -> str:
    """What the protected server answers a call without a token: its `WWW-Authenticate`."""
    async with httpx.AsyncClient() as http:
        refused = await http.post(server.issuer + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 401
    return refused.headers["www-authenticate"]


async def called(server: MemoryAuthorizationServer, token: str | None) -> str:
    """The server's `note` tool called by a worker's hub, with `token` as the grant's bearer."""
    hub = McpHub(LOCAL)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    grant = McpGrant(name="notes", url=server.issuer + "/mcp", default_policy="allow", timeout_s=10, headers=headers)
    try:

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            return None

        result = await hub.call(grant, "note", {"text": "hi"}, progress)
        assert isinstance(result, Mapped)
        return result.text()
    finally:
        await hub.close()


async def test_a_sign_in_from_the_servers_challenge_to_its_tool(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await api.session()
    resource = server.issuer + "/mcp"
    begun = await sign_ins(broker).begin(
        session_id=session.id,
        subject=None,
        grant="notes",
        server_url=resource,
        auth=OAuthAuth(client_id=CLIENT_ID, client_secret=CLIENT_SECRET),
        challenge=await challenge(server),
    )
    url = httpx.URL(begun.authorization_url)
    assert url.params["code_challenge_method"] == "S256"
    assert url.params["resource"] == resource
    # No scope on the grant and none in the challenge: what the server's resource metadata lists.
    assert url.params["scope"] == "notes:read notes:write"
    # Without a token the server will not serve the grant.
    assert "could not be reached" in await called(server, None)

    page = await open_callback(api, await redirected(begun.authorization_url))
    assert page.status_code == 200, page.text
    (connection,) = await connections(api, session)
    assert connection["scopes"] == ["notes:read", "notes:write"]
    stored = await broker.mcp_connections.tokens(TokenCipher(SecretStr(SECRET)), owner_of(None, session.id), resource)
    assert stored is not None
    token = OAuthToken.model_validate_json(stored)
    assert (await called(server, token.access_token)).startswith("noted: hi")


async def test_without_a_client_id_the_worker_registers_one(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await api.session()
    resource = server.issuer + "/mcp"
    # No challenge: the well-known paths are asked.
    begun = await sign_ins(broker).begin(
        session_id=session.id, subject="person-7", grant="notes", server_url=resource, auth=OAuthAuth(("notes:read",))
    )
    client_id = httpx.URL(begun.authorization_url).params["client_id"]
    assert client_id != CLIENT_ID
    assert server.clients[client_id].token_endpoint_auth_method == "none"
    assert httpx.URL(begun.authorization_url).params["scope"] == "notes:read"
    page = await open_callback(api, await redirected(begun.authorization_url))
    assert page.status_code == 200, page.text
    # The subject's connection: it names no session.
    listed = await api.key.get("/v1/mcp/connections", params={"subject": "person-7"})
    assert [(c["grant"], c["session_id"], c["scopes"]) for c in listed.json()["items"]] == [
        ("notes", None, ["notes:read"])
    ]


async def test_metadata_at_a_private_address_is_not_fetched_where_that_is_not_allowed(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await api.session()
    strict = ProviderAddresses(allow_private=False, timeout_s=5)
    with pytest.raises(SignInUnavailable, match="a loopback address"):
        await sign_ins(broker, strict).begin(
            session_id=session.id,
            subject=None,
            grant="notes",
            server_url=server.issuer + "/mcp",
            auth=OAuthAuth(),
            challenge=await challenge(server),
        )
    assert server.clients.keys() == {CLIENT_ID}


async def test_metadata_naming_another_issuer_is_refused(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await api.session()
    with pytest.raises(SignInUnavailable, match="names the issuer"):
        await sign_ins(broker).begin(
            session_id=session.id,
            subject=None,
            grant="notes",
            server_url=server.issuer + "/mcp",
            auth=OAuthAuth(),
            challenge=f'Bearer resource_metadata="{server.issuer}/liar-resource"',
        )


async def test_resource_metadata_for_another_server_is_refused(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await api.session()
    with pytest.raises(SignInUnavailable, match=r"describes the resource https://mcp\.example\.com/mcp"):
        await sign_ins(broker).begin(
            session_id=session.id,
            subject=None,
            grant="notes",
            server_url=server.issuer + "/mcp",
            auth=OAuthAuth(),
            challenge=f'Bearer resource_metadata="{server.issuer}/elsewhere-resource"',
        )


async def test_once_signed_in_a_run_calls_the_grants_tool_with_the_persons_token(
    settings: Settings, redis_url: str, api_key: str, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    update: dict[str, object] = {"secret_key": SecretStr(SECRET), "public_url": PUBLIC_URL}
    resource = server.issuer + "/mcp"
    auth = {"type": "oauth", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    async with running_api(settings, redis_url, api_key, update) as api:
        session = await api.session(mcp=[{"name": "notes", "url": resource, "default_policy": "allow", "auth": auth}])
        call = '/call mcp__notes__note {"text": "hi"}'
        # Signed in before any step needed the grant: no step asks.
        begun = await sign_ins(broker).begin(
            session_id=session.id,
            subject=None,
            grant="notes",
            server_url=resource,
            auth=OAuthAuth(client_id=CLIENT_ID, client_secret=CLIENT_SECRET),
            challenge=await challenge(server),
        )
        assert (await open_callback(api, await redirected(begun.authorization_url))).status_code == 200
        (result,) = of_type(await answer(api, session, call), "tool_result")
        assert result["is_error"] is False, result
        assert texts(result)[0] == "noted: hi"
        assert of_kind(await extensions(api, session), "mcp_authorization_required") == []


def oauth_grant(server: MemoryAuthorizationServer) -> dict[str, object]:
    auth = {"type": "oauth", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    return {"name": "notes", "url": server.issuer + "/mcp", "default_policy": "allow", "auth": auth}


def of_kind(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e["type"] == kind]


async def test_a_server_whose_sign_in_cannot_begin_is_left_out_and_not_tried_at_every_step(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    async def nothing(scope: Any, receive: Any, send: Any) -> None:
        # No metadata, no MCP: every request is a 404 (its lifespan only started and stopped).
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        seen.append(scope["path"])

    seen: list[str] = []
    update: dict[str, object] = {"secret_key": SecretStr(SECRET), "public_url": PUBLIC_URL}
    async with serve_asgi(nothing) as base, running_api(settings, redis_url, api_key, update) as api:
        auth = {"type": "oauth", "client_id": CLIENT_ID}
        session = await api.session(
            mcp=[{"name": "notes", "url": base + "/mcp", "default_policy": "allow", "auth": auth}]
        )
        call = '/call mcp__notes__note {"text": "hi"}'
        (first,) = of_type(await answer(api, session, call), "tool_result")
        discovered = [path for path in seen if "/.well-known/" in path]
        assert discovered
        (second,) = of_type(await answer(api, session, call), "tool_result")
        assert first["is_error"] is True
        assert second["is_error"] is True
        # The second step did not discover again: the server's failure is remembered for a while.
        assert [path for path in seen if "/.well-known/" in path] == discovered
        assert of_kind(await extensions(api, session), "mcp_authorization_required") == []
