"""A run whose step needs a person's sign-in waits for it held by no worker, as on an approval: the real
worker asks (`mcp_authorization_required`, an inbox item, an `input.requested` webhook) and parks the run;
the callback in the API (the test plays the browser through the `mcp` package's own authorization server)
wakes it and the step calls the grant's tool with the person's token; a decline or the wait running out
wakes it without the grant's tools, the model told why, `mcp_authorization_declined` saying which."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr
from standardwebhooks import Webhook

from broker.broker import Broker
from switchboard.settings import Settings
from tests.api.test_mcp_grants import texts
from tests.api.test_mcp_oauth_callback import CALLBACK, PUBLIC_URL, SECRET, extensions, open_callback, redirected
from tests.api.test_providers import CLAUDE, provider_session
from tests.api_client import Api, Event, Session, of_type, run_over, running_api
from tests.fakes import FakeProvider, Reply, anthropic_stream
from tests.helpers import held_work, owed_work
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET, MemoryAuthorizationServer, authorization_server
from tests.stack import Stack, run_worker, serve_api
from tests.webhook_receiver import receiving

pytestmark = pytest.mark.private_providers

UPDATE: dict[str, object] = {"secret_key": SecretStr(SECRET), "public_url": PUBLIC_URL}
CALL = '/call mcp__notes__note {"text": "hi"}'


@pytest.fixture
async def server() -> AsyncIterator[MemoryAuthorizationServer]:
    async with authorization_server(CALLBACK, scopes=["notes:read"], method="client_secret_basic") as running:
        yield running


def oauth_grant(server: MemoryAuthorizationServer) -> dict[str, object]:
    auth = {"type": "oauth", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    return {"name": "notes", "url": server.issuer + "/mcp", "default_policy": "allow", "auth": auth}


def of_kind(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e["type"] == kind]


async def parked(api: Api, broker: Broker[Settings], session: Session, timeout: float = 15) -> Event:
    """The sign-in the run asked for, once its run waits for it held by no worker."""
    run_key = broker.core.keys.session(session.id).run
    until = time.monotonic() + timeout
    while True:
        state = await broker.core.redis.hget(run_key, "state")
        if state == b"waiting":
            break
        assert time.monotonic() < until, state
        await asyncio.sleep(0.05)
    assert await held_work(broker, session.id) == []
    events = await extensions(api, session)
    # Nothing of the step ran: no model call, no tool call, and the run is not over.
    assert not of_kind(events, "tool_call")
    assert not of_kind(events, "message_assistant")
    assert not run_over(events)
    (asked,) = of_kind(events, "mcp_authorization_required")
    return asked


async def inbox_of(api: Api, session: Session, count: int, timeout: float = 10) -> list[dict[str, Any]]:
    """The session's inbox items once there are `count` (the workers apply notices after the fact)."""
    until = time.monotonic() + timeout
    while True:
        answer = await api.key.get("/v1/inbox", params={"limit": 200})
        assert answer.status_code == 200, answer.text
        found = [item for item in answer.json()["items"] if item["session_id"] == session.id]
        if len(found) == count:
            return found
        assert time.monotonic() < until, found
        await asyncio.sleep(0.05)


async def decline(api: Api, session: Session, authorization_id: str) -> int:
    async with api.as_session(session) as person:
        answer = await person.post(f"/v1/sessions/{session.id}/mcp-authorizations/{authorization_id}/decline")
    return answer.status_code


@pytest.mark.both_redis
async def test_a_run_waits_held_by_no_worker_and_goes_on_with_the_token_once_signed_in(
    settings: Settings,
    redis_url: str,
    api_key: str,
    broker: Broker[Settings],
    server: MemoryAuthorizationServer,
) -> None:
    async with receiving() as receiver, running_api(settings, redis_url, api_key, UPDATE) as api:
        hook = await api.key.post("/v1/webhooks", json={"url": receiver.url("/hook"), "events": ["input.requested"]})
        assert hook.status_code == 201, hook.text
        session = await api.session(mcp=[oauth_grant(server)])
        run_id = (await api.send(session, CALL))["run_id"]
        asked = await parked(api, broker, session)

        (item,) = await inbox_of(api, session, 1)
        assert item["kind"] == "authorization"
        assert (item["authorization_id"], item["authorization_url"]) == (
            asked["authorization_id"],
            asked["authorization_url"],
        )
        assert (item["tool"], item["call_id"], item["run_id"], item["request_id"]) == ("notes", "", run_id, None)
        assert item["deadline"] == asked["expires_at"]
        (sent,) = await receiver.wait("/hook")
        payload = Webhook(hook.json()["secret"]).verify(sent.body, sent.headers)
        assert payload["type"] == "input.requested"
        assert (payload["data"]["session_id"], payload["data"]["run_id"]) == (session.id, run_id)
        assert payload["data"]["event"]["authorization_url"] == asked["authorization_url"]

        assert (await open_callback(api, await redirected(asked["authorization_url"]))).status_code == 200
        events = await api.wait_for(session, run_over, timeout=15)
        assert of_type(events, "run_completed")
        # The same run went on: the step called the tool with the person's token (the server takes no other).
        (result,) = of_type(events, "tool_result")
        assert result["is_error"] is False, result
        assert texts(result)[0] == "noted: hi"
        assert {e["run_id"] for e in of_type(events, "run_started")} == {run_id}
        assert await inbox_of(api, session, 0) == []
        logged = await extensions(api, session)
        assert len(of_kind(logged, "mcp_authorization_required")) == 1
        (completed,) = of_kind(logged, "mcp_authorization_completed")
        assert completed["authorization_id"] == asked["authorization_id"]
        assert of_kind(logged, "mcp_authorization_declined") == []
        # Nobody else was sent the sign-in's link: one delivery, of the one notable sign-in event.
        assert len(receiver.received["/hook"]) == 1


async def test_a_decline_wakes_the_run_without_the_grant_and_the_model_is_told_why(
    settings: Settings,
    redis_url: str,
    api_key: str,
    broker: Broker[Settings],
    server: MemoryAuthorizationServer,
    fake: FakeProvider,
) -> None:
    async with running_api(settings, redis_url, api_key, UPDATE) as api:
        session = await provider_session(api, fake, CLAUDE, system_prompt="Be brief.", mcp=[oauth_grant(server)])
        other = await api.session()
        fake.replies = [Reply(frames=anthropic_stream({"type": "text", "text": "ok"})) for _ in range(2)]
        await api.send(session, "take a note")
        asked = await parked(api, broker, session)
        assert fake.requests == []
        await inbox_of(api, session, 1)

        sign_in = asked["authorization_id"]
        # Another session declines nothing of this one's, by its own path or this one's.
        assert await decline(api, other, sign_in) == 404
        async with api.as_session(other) as stranger:
            foreign = await stranger.post(f"/v1/sessions/{session.id}/mcp-authorizations/{sign_in}/decline")
        assert foreign.status_code == 404, foreign.text
        assert await decline(api, session, str(uuid.uuid4())) == 404
        assert await decline(api, session, "g:notes") == 404
        assert await decline(api, session, "x" * 65) == 400
        assert (await broker.core.redis.hget(broker.core.keys.session(session.id).run, "state")) == b"waiting"

        assert await decline(api, session, sign_in) == 200
        assert await decline(api, session, sign_in) == 409
        await api.wait_for(session, run_over, timeout=15)
        told = json.dumps(fake.requests[0]["system"])
        assert "Be brief." in told
        assert "notes: the person declined to sign in to it" in told
        assert "mcp__notes__" not in json.dumps(fake.requests[0].get("tools", []))
        logged = await extensions(api, session)
        (declined,) = of_kind(logged, "mcp_authorization_declined")
        assert (declined["authorization_id"], declined["grant"], declined["reason"]) == (sign_in, "notes", "declined")
        assert declined["server_url"] == server.issuer + "/mcp"
        assert await inbox_of(api, session, 0) == []
        # Its link no longer completes, and the session does not ask again.
        assert (await open_callback(api, await redirected(asked["authorization_url"]))).status_code == 400
        await api.send(session, "take another")
        await api.wait_for(session, lambda events: len(of_kind(events, "run_completed")) == 2, timeout=15)
        assert "notes: the person declined to sign in to it" in json.dumps(fake.requests[1]["system"])
        assert len(of_kind(await extensions(api, session), "mcp_authorization_required")) == 1


async def test_a_sign_in_that_runs_out_wakes_the_run_and_is_not_asked_again_in_it(
    settings: Settings, redis_url: str, api_key: str, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    update = {**UPDATE, "mcp_authorization_timeout_s": 1}
    async with running_api(settings, redis_url, api_key, update) as api:
        session = await api.session(mcp=[oauth_grant(server)])
        run_id = (await api.send(session, CALL))["run_id"]
        asked = await parked(api, broker, session)
        events = await api.wait_for(session, run_over, timeout=15)
        assert of_type(events, "run_completed")
        # The step went on without the grant's tools: the scripted model's call of it is unknown to it.
        (result,) = of_type(events, "tool_result")
        assert result["is_error"] is True
        logged = await extensions(api, session)
        (lapsed,) = of_kind(logged, "mcp_authorization_declined")
        assert (lapsed["authorization_id"], lapsed["reason"]) == (asked["authorization_id"], "expired")
        # The run's next step needed the grant again, and was not asked again.
        assert len(of_kind(logged, "mcp_authorization_required")) == 1
        assert await inbox_of(api, session, 0) == []
        # Its link has run out.
        assert (await open_callback(api, await redirected(asked["authorization_url"]))).status_code == 400
        # A new run asks anew, and waits again.
        second = (await api.send(session, CALL))["run_id"]
        assert second != run_id
        until = time.monotonic() + 15
        while len(of_kind(await extensions(api, session), "mcp_authorization_required")) < 2:
            assert time.monotonic() < until
            await asyncio.sleep(0.05)


async def test_the_model_is_told_a_sign_in_ran_out(
    settings: Settings,
    redis_url: str,
    api_key: str,
    broker: Broker[Settings],
    server: MemoryAuthorizationServer,
    fake: FakeProvider,
) -> None:
    update = {**UPDATE, "mcp_authorization_timeout_s": 1}
    async with running_api(settings, redis_url, api_key, update) as api:
        session = await provider_session(api, fake, CLAUDE, mcp=[oauth_grant(server)])
        fake.replies = [Reply(frames=anthropic_stream({"type": "text", "text": "ok"}))]
        await api.send(session, "take a note")
        await parked(api, broker, session)
        await api.wait_for(session, run_over, timeout=15)
        assert "notes: the person did not sign in to it in time" in json.dumps(fake.requests[0]["system"])


async def test_a_worker_stopped_while_the_run_waits_loses_nothing(
    settings: Settings, redis_url: str, api_key: str, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    configured = settings.model_copy(update={"bootstrap_api_key": SecretStr(api_key), **UPDATE})
    async with serve_api(configured, redis_url) as url:
        api = Api(Stack(url, api_key, configured, broker))
        try:
            async with run_worker(configured, redis_url):
                session = await api.session(mcp=[oauth_grant(server)])
                run_id = (await api.send(session, CALL))["run_id"]
                asked = await parked(api, broker, session)
            # No worker is left, and none is needed while the run waits; the callback reaches another API
            # process, and a new worker runs the step it queues.
            async with serve_api(configured, redis_url) as other:
                callback = Api(Stack(other, api_key, configured, broker))
                try:
                    page = await open_callback(callback, await redirected(asked["authorization_url"]))
                finally:
                    await callback.aclose()
            assert page.status_code == 200, page.text
            assert await owed_work(broker, session.id) == [f"s|{session.id}|{run_id}|0|1"]
            async with run_worker(configured, redis_url):
                events = await api.wait_for(session, run_over, timeout=15)
            (result,) = of_type(events, "tool_result")
            assert result["is_error"] is False, result
            assert {e["run_id"] for e in of_type(events, "run_completed")} == {run_id}
        finally:
            await api.aclose()
