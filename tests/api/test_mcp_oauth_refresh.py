"""A grant's tokens refreshed before they run out: signed in through the `mcp` package's own authorization
server (which issues short-lived access tokens here), then a worker's GrantTokens finds them within the
margin and refreshes them at the token endpoint the sign-in used, once across workers, keeping a rotated
refresh token, forgetting the tokens when the server refuses the refresh, and leaving them as they were
when the endpoint cannot be reached, never answers or answers too much."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import HttpUrl, SecretStr

from broker.broker import Broker
from broker.services.mcp_connections import McpConnection, owner_of
from broker.services.token_cipher import TokenCipher
from common import token_endpoint
from common.addresses import ProviderAddresses
from switchboard.settings import Settings
from tests.api.test_mcp_oauth_callback import CALLBACK, PUBLIC_URL, SECRET, api, open_callback, redirected
from tests.api.test_mcp_oauth_sign_in import called, challenge, sign_ins
from tests.api_client import Api, Session
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET, MemoryAuthorizationServer, authorization_server
from workers.config import McpGrant, OAuthAuth
from workers.mcp.grant_tokens import GrantTokens
from workers.mcp.refresh import Refresher

__all__ = ["api"]
pytestmark = pytest.mark.private_providers

CIPHER = TokenCipher(SecretStr(SECRET))


@pytest.fixture
async def server() -> AsyncIterator[MemoryAuthorizationServer]:
    # Access tokens of 5 s: within the 30 s margin from the start, so the first use refreshes them.
    scopes = ["notes:read"]
    options: dict[str, Any] = {"method": "client_secret_basic", "resource_scopes": scopes, "expires_in": 5}
    async with authorization_server(CALLBACK, scopes=scopes, **options) as running:
        yield running


def grant(server: MemoryAuthorizationServer) -> McpGrant:
    auth = OAuthAuth(client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
    return McpGrant(name="notes", url=server.issuer + "/mcp", default_policy="allow", oauth=auth)


def tokens_of(broker: Broker[Settings]) -> GrantTokens:
    """A worker's GrantTokens (each worker has its own)."""
    return GrantTokens(broker, CIPHER, HttpUrl(PUBLIC_URL), 60)


async def signed_in(api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer) -> Session:
    session = await api.session()
    begun = await sign_ins(broker).begin(
        session_id=session.id,
        subject=None,
        grant="notes",
        server_url=server.issuer + "/mcp",
        auth=OAuthAuth(client_id=CLIENT_ID, client_secret=CLIENT_SECRET),
        challenge=await challenge(server),
    )
    assert (await open_callback(api, await redirected(begun.authorization_url))).status_code == 200
    return session


async def stored(broker: Broker[Settings], session: Session, server: MemoryAuthorizationServer) -> dict[str, object]:
    found = await broker.mcp_connections.tokens(CIPHER, owner_of(None, session.id), server.issuer + "/mcp")
    assert found is not None
    kept: dict[str, object] = json.loads(found)
    return kept


async def record(broker: Broker[Settings], session: Session, server: MemoryAuthorizationServer) -> McpConnection:
    found = await broker.mcp_connections.get_for(owner_of(None, session.id), server.issuer + "/mcp")
    assert found is not None
    return found


def bearer(authorized: McpGrant) -> str | None:
    value = authorized.headers.get("Authorization")
    return value.removeprefix("Bearer ") if value else None


async def test_a_token_near_its_end_is_refreshed_and_the_rotated_refresh_token_kept(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await signed_in(api, broker, server)
    first = await stored(broker, session, server)
    assert (await record(broker, session, server)).refreshable

    (authorized,) = await tokens_of(broker).authorized(session.id, (grant(server),))
    token = bearer(authorized)
    assert token is not None
    assert token != first["access_token"]
    assert server.refreshed == [first["refresh_token"]]
    after = await stored(broker, session, server)
    # Rotated: the new refresh token is kept, the old one the server no longer takes.
    assert after["access_token"] == token
    assert after["refresh_token"] != first["refresh_token"]
    assert after["refresh_token"] in server.refresh
    assert first["refresh_token"] not in server.refresh
    # The scope carried forward, and the server takes the refreshed token.
    assert after["scope"] == "notes:read"
    assert (await called(server, token)).startswith("noted: hi")
    # The refreshed token is within the margin again (5 s tokens): a next use refreshes with the new one.
    await tokens_of(broker).authorized(session.id, (grant(server),))
    assert server.refreshed == [first["refresh_token"], after["refresh_token"]]


async def test_a_server_that_does_not_rotate_keeps_the_old_refresh_token_working(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    server.rotate = False
    session = await signed_in(api, broker, server)
    first = await stored(broker, session, server)
    (authorized,) = await tokens_of(broker).authorized(session.id, (grant(server),))
    assert bearer(authorized) not in (None, first["access_token"])
    assert (await stored(broker, session, server))["refresh_token"] == first["refresh_token"]


async def test_workers_needing_the_same_refresh_at_once_send_it_once(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await signed_in(api, broker, server)
    server.token_delay_s = 0.6
    # The refreshed token lasts: a worker that comes late finds it and has nothing to refresh.
    server.expires_in = 3600
    workers = [tokens_of(broker) for _ in range(4)]
    got = await asyncio.gather(*(w.authorized(session.id, (grant(server),)) for w in workers))
    tokens = {bearer(authorized) for (authorized,) in got}
    assert len(server.refreshed) == 1
    assert tokens == {(await stored(broker, session, server))["access_token"]}


async def test_workers_waiting_for_a_refresh_that_fails_go_on_without_waiting_out_the_claim(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await signed_in(api, broker, server)
    await repoint(broker, session, server, server.issuer + "/authorize")
    server.token_delay_s = 0.0
    started = asyncio.get_running_loop().time()
    got = await asyncio.gather(*(tokens_of(broker).authorized(session.id, (grant(server),)) for _ in range(3)))
    assert {bearer(authorized) for (authorized,) in got} == {None}
    assert asyncio.get_running_loop().time() - started < 5


async def test_a_refused_refresh_forgets_the_tokens_so_the_person_is_asked_again(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await signed_in(api, broker, server)
    server.refresh.clear()  # revoked: the server answers invalid_grant
    (authorized,) = await tokens_of(broker).authorized(session.id, (grant(server),))
    assert bearer(authorized) is None
    assert await broker.mcp_connections.get_for(owner_of(None, session.id), server.issuer + "/mcp") is None
    # What the step does next: the person is asked to sign in again.
    lacking = await tokens_of(broker).ask(session.id, "run-1", (authorized,))
    assert len(lacking.waiting) == 1
    assert lacking.why == {}


async def test_a_token_endpoint_that_never_answers_leaves_the_tokens_as_they_were(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(token_endpoint, "EXCHANGE_TIMEOUT_S", 0.5)
    session = await signed_in(api, broker, server)
    before = await stored(broker, session, server)
    await repoint(broker, session, server, server.issuer + "/never")
    (authorized,) = await tokens_of(broker).authorized(session.id, (grant(server),))
    assert bearer(authorized) is None
    assert await stored(broker, session, server) == before
    # The claim was let go: the next step tries again at once rather than waiting for it to run out.
    await repoint(broker, session, server, server.issuer + "/token")
    (authorized,) = await tokens_of(broker).authorized(session.id, (grant(server),))
    assert bearer(authorized) not in (None, before["access_token"])


@pytest.mark.parametrize("path", ["/huge", "/authorize"])
async def test_a_token_endpoint_answering_too_much_or_no_token_is_not_taken(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, path: str
) -> None:
    session = await signed_in(api, broker, server)
    before = await stored(broker, session, server)
    await repoint(broker, session, server, server.issuer + path)
    (authorized,) = await tokens_of(broker).authorized(session.id, (grant(server),))
    assert bearer(authorized) is None
    assert await stored(broker, session, server) == before


async def test_a_token_endpoint_at_a_private_address_is_not_reached_where_that_is_not_allowed(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await signed_in(api, broker, server)
    before = await stored(broker, session, server)
    strict = Refresher(broker.mcp_connections, CIPHER, ProviderAddresses(allow_private=False, timeout_s=5))
    assert await strict.refresh(await record(broker, session, server)) is None
    assert server.refreshed == []
    assert await stored(broker, session, server) == before


async def test_a_new_sign_in_during_a_refresh_wins_over_it(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await signed_in(api, broker, server)
    server.refresh_delay_s = 2.0
    refreshing = asyncio.create_task(tokens_of(broker).authorized(session.id, (grant(server),)))
    async with asyncio.timeout(5):
        while not (await record(broker, session, server)).refreshing:
            await asyncio.sleep(0.02)
    server.expires_in = 3600
    await signed_in_again(api, broker, server, session)
    assert not refreshing.done()
    again = await stored(broker, session, server)
    (late,) = await refreshing
    # The late refresh's tokens are not kept over the new sign-in's, and the step uses the new ones.
    assert server.refreshed
    assert await stored(broker, session, server) == again
    assert bearer(late) == again["access_token"]


async def signed_in_again(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, session: Session
) -> None:
    begun = await sign_ins(broker).begin(
        session_id=session.id,
        subject=None,
        grant="notes",
        server_url=server.issuer + "/mcp",
        auth=OAuthAuth(client_id=CLIENT_ID, client_secret=CLIENT_SECRET),
    )
    assert (await open_callback(api, await redirected(begun.authorization_url))).status_code == 200


async def repoint(broker: Broker[Settings], session: Session, server: MemoryAuthorizationServer, url: str) -> None:
    """The connection's recorded token endpoint made `url` (a hostile server's metadata could name it)."""
    connections = broker.mcp_connections
    found = await record(broker, session, server)
    endpoint = await connections.endpoint(CIPHER, found.id)
    assert endpoint is not None
    await connections.keep(
        CIPHER,
        subject=None,
        session_id=session.id,
        grant=found.grant,
        server_url=found.server_url,
        scopes=list(found.scopes),
        expires_at_ms=found.expires_at_ms,
        tokens=json.dumps(await stored(broker, session, server)).encode(),
        endpoint=dataclasses.replace(endpoint, url=url),
    )
