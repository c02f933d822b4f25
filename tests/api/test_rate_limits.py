"""Abuse limits: a credential past its rate gets 429 with Retry-After; guessing credentials gets braked."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from broker.settings import Settings
from tests.api_client import Api, running_api

BAD = "swb_st_" + "0" * 32 + "guess"


@pytest.fixture
async def limited(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    update: dict[str, object] = {
        "rate_limit_per_s": 2.0,
        "rate_limit_burst": 30,
        "auth_failure_limit": 5,
        "auth_failure_window_s": 30.0,
    }
    async with running_api(settings, redis_url, api_key, update, worker=False) as api:
        yield api


async def test_a_credential_past_its_burst_gets_429_with_retry_after_and_others_do_not(limited: Api) -> None:
    session = await limited.session()  # a few of the key's 30
    async with limited.as_session(session) as http:
        answers = [await http.get(f"/v1/sessions/{session.id}") for _ in range(40)]
    statuses = [a.status_code for a in answers]
    assert statuses.count(200) >= 29
    assert 429 in statuses
    refused = answers[statuses.index(429)]
    assert refused.json()["error"]["code"] == "too_many_requests"
    assert "limited to 2 requests a second (bursts of 30)" in refused.json()["error"]["message"]
    assert int(refused.headers["Retry-After"]) >= 1
    # The API key has its own bucket.
    assert (await limited.key.get(f"/v1/sessions/{session.id}")).status_code == 200


async def test_the_hot_routes_count_too(limited: Api) -> None:
    session = await limited.session()
    web = await limited.register(session)
    path = f"/v1/sessions/{session.id}/clients/{web['id']}/ping"
    async with limited.as_session(session) as http:
        statuses = [(await http.post(path)).status_code for _ in range(40)]
    assert 429 in statuses


async def test_guessing_tokens_is_braked_but_a_working_credential_carries_on(limited: Api) -> None:
    session = await limited.session()
    async with limited.as_session(session) as http:
        assert (await http.get(f"/v1/sessions/{session.id}")).status_code == 200  # known good from here
    path = f"/v1/sessions/{session.id}"
    guesses = [
        (await limited.key.get(path, headers={"Authorization": f"Bearer {BAD}{i}"})).status_code for i in range(8)
    ]
    assert guesses[:5] == [401] * 5
    assert guesses[5:] == [429] * 3
    answer = await limited.key.get(path, headers={"Authorization": f"Bearer {BAD}x"})
    assert answer.status_code == 429
    assert answer.json()["error"]["message"].startswith("too many failed sign-ins from this address")
    async with limited.as_session(session) as http:
        assert (await http.get(path)).status_code == 200


async def test_secrets_are_never_logged(limited: Api, api_key: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    session = await limited.session()
    async with limited.as_session(session) as http:
        await http.get(f"/v1/sessions/{session.id}")
        await http.get("/v1/agents")  # 403 for a token
    await limited.key.get("/v1/sessions/nope", headers={"Authorization": f"Bearer {BAD}"})
    await limited.key.post("/v1/sessions", content=b"{not json")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for secret in (session.token, api_key, BAD):
        assert secret not in logged
