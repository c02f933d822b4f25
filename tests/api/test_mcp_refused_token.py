"""A token its grant's server no longer takes (a 401, as when the resource moved to another authorization
server): it is not sent again, the person is asked to sign in anew, and the new token serves the grant."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from pydantic import SecretStr

from switchboard.settings import Settings
from tests.api.test_mcp_grants import answer, texts
from tests.api.test_mcp_oauth_callback import PUBLIC_URL, SECRET, extensions, open_callback, redirected
from tests.api.test_mcp_oauth_sign_in import LOCAL, oauth_grant, of_kind, server
from tests.api_client import Api, Event, Session, of_type, run_over, running_api
from tests.oauth_server import MemoryAuthorizationServer
from workers.config import McpGrant
from workers.mcp.hub import McpHub

pytestmark = pytest.mark.private_providers
__all__ = ["server"]

CALL = '/call mcp__notes__note {"text": "hi"}'


async def signed_in(api: Api, session: Session, asked: int, timeout: float = 15) -> None:
    """Once the session has asked for its `asked`th sign-in (the run's step waits on it), open that link as
    the person would."""
    until = asyncio.get_running_loop().time() + timeout
    while len(links := of_kind(await extensions(api, session), "mcp_authorization_required")) < asked:
        assert asyncio.get_running_loop().time() < until, links
        await asyncio.sleep(0.05)
    assert len(links) == asked, links
    assert (await open_callback(api, await redirected(links[-1]["authorization_url"]))).status_code == 200


async def signed_in_run(api: Api, session: Session, asked: int) -> list[Event]:
    """`CALL` sent, its step waiting for the person's `asked`th sign-in, which they give: the run's events."""
    run_id = (await api.send(session, CALL))["run_id"]
    await signed_in(api, session, asked)
    events = await api.wait_for(session, lambda es: any(e.get("run_id") == run_id for e in es if run_over([e])))
    return events[next(i for i, e in enumerate(events) if e.get("run_id") == run_id) :]


async def test_a_token_the_server_refuses_is_dropped_and_the_person_asked_again(
    settings: Settings, redis_url: str, api_key: str, server: MemoryAuthorizationServer
) -> None:
    update: dict[str, object] = {"secret_key": SecretStr(SECRET), "public_url": PUBLIC_URL}
    async with running_api(settings, redis_url, api_key, update) as api:
        session = await api.session(mcp=[oauth_grant(server)])
        (first,) = of_type(await signed_in_run(api, session, asked=1), "tool_result")
        assert first["is_error"] is False, first
        # The server forgets every token it issued: the next listing is refused.
        server.access.clear()
        # The refused token is not sent again: the run's next step (after the call that failed for want of
        # the grant's tools) asks the person, who signs in anew.
        (refused,) = of_type(await signed_in_run(api, session, asked=2), "tool_result")
        assert refused["is_error"] is True
        (again,) = of_type(await answer(api, session, CALL), "tool_result")
        assert again["is_error"] is False, again
        assert texts(again)[0] == "noted: hi"


async def test_the_hub_says_which_credentials_a_server_refused(server: MemoryAuthorizationServer) -> None:
    hub = McpHub(LOCAL)
    forged = McpGrant(
        name="notes",
        url=server.issuer + "/mcp",
        default_policy="allow",
        timeout_s=10,
        headers={"Authorization": "Bearer forged"},
    )
    try:
        assert not hub.refused(forged)
        assert await hub.tools((forged,)) == {}
        assert hub.refused(forged)
        # Another token is another connection, not yet refused.
        other = dataclasses.replace(forged, headers={"Authorization": "Bearer other"})
        assert not hub.refused(other)
    finally:
        await hub.close()
