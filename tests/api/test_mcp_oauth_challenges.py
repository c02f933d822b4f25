"""What a grant's server says when it refuses a request (`WWW-Authenticate: Bearer ...`), followed: a 401
to a request without a token tells the next sign-in where the metadata is and what scope to ask for (not
at another origin); a token the server refused is not sent again (refreshed where it can be, else the
person asked again); a 403 `insufficient_scope` has the person sign in again for the union of scopes, at
most twice, the call failing with an error that says why. A worker's hub and GrantTokens against the
`mcp` package's own authorization server, the test playing the person's browser."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import HttpUrl, SecretStr

from broker.broker import Broker
from broker.services.mcp_connections import owner_of
from broker.services.token_cipher import TokenCipher
from switchboard.settings import Settings
from tests.api.test_mcp_grants import answer, texts
from tests.api.test_mcp_oauth_callback import CALLBACK, PUBLIC_URL, SECRET, api, extensions, open_callback, redirected
from tests.api.test_mcp_oauth_sign_in import LOCAL
from tests.api_client import Api, Event, Session, of_type, run_over, running_api
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET, MemoryAuthorizationServer, authorization_server
from workers.config import McpGrant, OAuthAuth
from workers.mcp.challenges import Challenges
from workers.mcp.grant_tokens import MAX_STEP_UPS, GrantTokens
from workers.mcp.hub import McpHub
from workers.mcp.mapped import Mapped

__all__ = ["api"]
pytestmark = pytest.mark.private_providers

CIPHER = TokenCipher(SecretStr(SECRET))
# The run a step asks for (only a lapsed sign-in's run is read by `ask`).
RUN = "run-1"


@pytest.fixture
async def server() -> AsyncIterator[MemoryAuthorizationServer]:
    # `/mcp` takes a notes:read token; its `erase` tool wants notes:admin too, which the server offers.
    options: dict[str, Any] = {"method": "client_secret_basic", "resource_scopes": ["notes:read"]}
    async with authorization_server(CALLBACK, scopes=["notes:read", "notes:admin"], **options) as running:
        running.scoped_tools = {"erase": "notes:admin"}
        yield running


@pytest.fixture
async def hub() -> AsyncIterator[McpHub]:
    running = McpHub(LOCAL)
    try:
        yield running
    finally:
        await running.close()


def grant(server: MemoryAuthorizationServer) -> McpGrant:
    auth = OAuthAuth(client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
    return McpGrant(name="notes", url=server.issuer + "/mcp", default_policy="allow", oauth=auth)


def tokens_of(broker: Broker[Settings], hub: McpHub) -> GrantTokens:
    return GrantTokens(broker, CIPHER, HttpUrl(PUBLIC_URL), 60, hub.refused, hub.challenges)


async def call(hub: McpHub, authorized: McpGrant, tool: str) -> str:
    async def progress(progress: float, total: float | None, message: str | None) -> None:
        return None

    result = await hub.call(authorized, tool, {"text": "hi"}, progress)
    assert isinstance(result, Mapped)
    return result.text()


async def asked_urls(api: Api, session: Session) -> list[httpx.URL]:
    events = await extensions(api, session)
    return [httpx.URL(e["authorization_url"]) for e in events if e["type"] == "mcp_authorization_required"]


async def asks(tokens: GrantTokens, session: Session, bare: McpGrant) -> bool:
    """Whether the step's `ask` began a sign-in for the grant (one the step waits for)."""
    lacking = await tokens.ask(session.id, RUN, (bare,))
    return len(lacking.waiting) == 1 and not lacking.why


async def sign_in(api: Api, tokens: GrantTokens, session: Session, server: MemoryAuthorizationServer) -> httpx.URL:
    """The step's ask, and the person signing in at the link it gave; that link."""
    (bare,) = await tokens.authorized(session.id, (grant(server),))
    assert "Authorization" not in bare.headers
    assert await asks(tokens, session, bare)
    url = (await asked_urls(api, session))[-1]
    assert (await open_callback(api, await redirected(str(url)))).status_code == 200
    return url


async def authorized(tokens: GrantTokens, session: Session, server: MemoryAuthorizationServer) -> McpGrant:
    (found,) = await tokens.authorized(session.id, (grant(server),))
    return found


async def test_a_403_insufficient_scope_signs_the_person_in_again_for_the_union_of_scopes(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, hub: McpHub
) -> None:
    tokens, session = tokens_of(broker, hub), await api.session()
    first = await sign_in(api, tokens, session, server)
    assert first.params["scope"] == "notes:read"
    with_token = await authorized(tokens, session, server)
    assert (await call(hub, with_token, "note")).startswith("noted: hi")
    # The call the token's scope does not cover fails saying so, in words the model can pass on.
    refused = await call(hub, with_token, "erase")
    assert 'needs more permission for this (insufficient_scope, scope "notes:admin")' in refused
    assert "sign in to it again" in refused

    # Whichever worker's GrantTokens looks next (a call's, a step's) goes without the token until the
    # step-up is asked for; once its sign-in waits, the token is sent again (the other tools work).
    assert "Authorization" not in (await authorized(tokens, session, server)).headers
    elsewhere = GrantTokens(broker, CIPHER, HttpUrl(PUBLIC_URL), 60, challenges=Challenges())
    assert "Authorization" not in (await authorized(elsewhere, session, server)).headers
    (bare,) = await elsewhere.authorized(session.id, (grant(server),))
    assert await asks(elsewhere, session, bare)
    assert "Authorization" in (await authorized(tokens, session, server)).headers
    url = (await asked_urls(api, session))[-1]
    assert url.params["scope"] == "notes:read notes:admin"

    # The person signs in again, for what was granted and what the server wants.
    assert url.params["resource"] == server.issuer + "/mcp"
    assert (await open_callback(api, await redirected(str(url)))).status_code == 200
    assert (await call(hub, await authorized(tokens, session, server), "erase")).startswith("erased: hi")
    assert server.step_ups == 1


async def test_a_server_that_keeps_asking_for_more_scope_is_followed_twice_then_the_call_fails(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, hub: McpHub
) -> None:
    server.grants = ["notes:read"]  # whatever is asked for, notes:admin is never granted
    tokens, session = tokens_of(broker, hub), await api.session()
    await sign_in(api, tokens, session, server)
    for _ in range(MAX_STEP_UPS):
        assert "insufficient_scope" in await call(hub, await authorized(tokens, session, server), "erase")
        await sign_in(api, tokens, session, server)
    # Past the bound the token is still sent (its other tools work), and the call fails saying why.
    with_token = await authorized(tokens, session, server)
    assert "Authorization" in with_token.headers
    assert "insufficient_scope" in await call(hub, with_token, "erase")
    with_token = await authorized(tokens, session, server)
    assert "Authorization" in with_token.headers
    assert (await call(hub, with_token, "note")).startswith("noted: hi")
    assert len(await asked_urls(api, session)) == 1 + MAX_STEP_UPS
    assert server.step_ups == MAX_STEP_UPS + 1


async def test_a_refused_token_is_neither_sent_again_nor_refreshed(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, hub: McpHub
) -> None:
    tokens, session = tokens_of(broker, hub), await api.session()
    await sign_in(api, tokens, session, server)
    with_token = await authorized(tokens, session, server)
    server.access.clear()  # the server no longer takes the token (revoked, or its resource moved)
    assert "refused the grant's authorization (401: invalid_token)" in await call(hub, with_token, "note")
    assert "Authorization" not in (await authorized(tokens, session, server)).headers
    # A refresh would ask where the refused token came from: the person signs in again instead.
    assert server.refreshed == []
    record = await broker.mcp_connections.get_for(owner_of(None, session.id), server.issuer + "/mcp")
    assert record is not None
    assert (record.expires_at_ms, record.refreshable) == (0, False)
    await sign_in(api, tokens, session, server)
    assert (await call(hub, await authorized(tokens, session, server), "note")).startswith("noted: hi")


async def test_a_refused_token_without_a_refresh_token_has_the_person_asked_again(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, hub: McpHub
) -> None:
    server.issue_refresh = False
    tokens, session = tokens_of(broker, hub), await api.session()
    await sign_in(api, tokens, session, server)
    with_token = await authorized(tokens, session, server)
    server.access.clear()
    assert "401" in await call(hub, with_token, "note")
    assert "Authorization" not in (await authorized(tokens, session, server)).headers
    record = await broker.mcp_connections.get_for(owner_of(None, session.id), server.issuer + "/mcp")
    assert record is not None
    assert record.expires_at_ms == 0
    # Not sent by any worker again: another worker's GrantTokens, which saw no 401, does not send it either.
    elsewhere = GrantTokens(broker, CIPHER, HttpUrl(PUBLIC_URL), 60, challenges=Challenges())
    assert "Authorization" not in (await authorized(elsewhere, session, server)).headers
    await sign_in(api, tokens, session, server)
    assert (await call(hub, await authorized(tokens, session, server), "note")).startswith("noted: hi")


async def test_the_challenges_scope_and_metadata_go_to_the_next_sign_in(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, hub: McpHub
) -> None:
    tokens, session = tokens_of(broker, hub), await api.session()
    # Same-origin metadata for another resource: followed, so the sign-in is refused as it should be.
    server.challenge = f'Bearer resource_metadata="{server.issuer}/elsewhere-resource", scope="notes:read"'
    (bare,) = await tokens.authorized(session.id, (grant(server),))
    assert await hub.tools((bare,)) == {}
    (bare,) = await tokens.authorized(session.id, (grant(server),))
    lacking = await tokens.ask(session.id, RUN, (bare,))
    assert (lacking.waiting, lacking.why) == ((), {"notes": "its sign-in could not be started"})
    noted = await broker.mcp_challenges.latest(session.id, "notes")
    assert noted is not None
    assert noted.header == server.challenge


async def test_resource_metadata_named_at_another_origin_is_not_fetched(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, hub: McpHub
) -> None:
    tokens, session = tokens_of(broker, hub), await api.session()
    # A private address elsewhere (it would never answer): passed over for the server's well-known paths.
    server.challenge = 'Bearer resource_metadata="http://10.255.255.1/meta", scope="notes:read notes:admin"'
    (bare,) = await tokens.authorized(session.id, (grant(server),))
    assert await hub.tools((bare,)) == {}
    (bare,) = await tokens.authorized(session.id, (grant(server),))
    assert await asks(tokens, session, bare)
    (url,) = await asked_urls(api, session)
    # The challenge's scope, not the resource metadata's.
    assert url.params["scope"] == "notes:read notes:admin"


async def test_a_challenge_past_its_bound_is_not_kept(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, hub: McpHub
) -> None:
    tokens, session = tokens_of(broker, hub), await api.session()
    server.challenge = 'Bearer scope="' + "s" * 4096 + '"'
    (bare,) = await tokens.authorized(session.id, (grant(server),))
    assert await hub.tools((bare,)) == {}
    await tokens.authorized(session.id, (grant(server),))
    assert await broker.mcp_challenges.latest(session.id, "notes") is None


async def asked_in(api: Api, session: Session, text: str, asked: int) -> str:
    """Send `text`; once its step asked for the `asked`th sign-in (and waits for it), the run's id."""
    run_id = str((await api.send(session, text))["run_id"])
    async with asyncio.timeout(15):
        while len(await asked_urls(api, session)) < asked:
            await asyncio.sleep(0.05)
    return run_id


async def ended(api: Api, session: Session, run_id: str) -> list[Event]:
    """The events from run `run_id`'s start, once it ended."""
    events = await api.wait_for(session, lambda es: any(e.get("run_id") == run_id for e in es if run_over([e])), 15)
    return events[next(i for i, e in enumerate(events) if e.get("run_id") == run_id) :]


async def test_a_run_refreshes_and_steps_up_through_the_worker(
    settings: Settings, redis_url: str, api_key: str, server: MemoryAuthorizationServer
) -> None:
    """The worker's own wiring (its hub's challenges handed to its GrantTokens): short-lived tokens
    refreshed between steps, and a tool the token's scope does not cover failing clearly, then asked for
    (the step waiting for the person, as for any sign-in)."""
    server.expires_in = 5
    update: dict[str, object] = {"secret_key": SecretStr(SECRET), "public_url": PUBLIC_URL}
    auth = {"type": "oauth", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    mcp = [{"name": "notes", "url": server.issuer + "/mcp", "default_policy": "allow", "auth": auth}]
    async with running_api(settings, redis_url, api_key, update) as api:
        session = await api.session(mcp=mcp)
        note, erase = '/call mcp__notes__note {"text": "hi"}', '/call mcp__notes__erase {"text": "hi"}'
        run_id = await asked_in(api, session, note, 1)
        (first,) = await asked_urls(api, session)
        assert (await open_callback(api, await redirected(str(first)))).status_code == 200
        (result,) = of_type(await ended(api, session, run_id), "tool_result")
        assert result["is_error"] is False, result
        (result,) = of_type(await answer(api, session, note), "tool_result")
        assert result["is_error"] is False, result
        assert len(server.refreshed) >= 1  # its 5 s tokens are within the margin at once
        # The call fails saying why; the run's next step asks for the step-up and waits for it.
        run_id = await asked_in(api, session, erase, 2)
        urls = await asked_urls(api, session)
        assert urls[-1].params["scope"] == "notes:read notes:admin"
        assert (await open_callback(api, await redirected(str(urls[-1])))).status_code == 200
        (refused,) = of_type(await ended(api, session, run_id), "tool_result")
        assert refused["is_error"] is True
        assert 'insufficient_scope, scope "notes:admin"' in texts(refused)[0]
        (erased,) = of_type(await answer(api, session, erase), "tool_result")
        assert erased["is_error"] is False, erased
        assert texts(erased)[0].startswith("erased: hi")
