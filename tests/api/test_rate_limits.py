"""Abuse limits: a credential past its rate gets 429 with Retry-After; guessing credentials gets braked."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import ValidationError

from api.rate_limit import BRAKED_FAILURE_DELAY_S
from switchboard.settings import Settings
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


async def test_padding_or_recasing_the_header_does_not_make_a_fresh_bucket(limited: Api) -> None:
    session = await limited.session()
    path = f"/v1/sessions/{session.id}"
    statuses = []
    async with httpx.AsyncClient(base_url=limited.stack.url, timeout=10) as http:
        for i in range(60):
            # Each header's raw text differs; the credential authentication reads is the same one.
            scheme = ("Bearer", "bearer", "BEARER")[i % 3]
            value = f"{scheme}{' ' * (1 + i)}{session.token}"
            statuses.append((await http.get(path, headers={"Authorization": value})).status_code)
    assert set(statuses) == {200, 429}
    # The burst (30, a few taken by creating the session with the key: not this credential) and what
    # 2 a second refills meanwhile; every other request was refused.
    assert statuses.count(200) <= 36
    assert statuses[-1] == 429


async def test_a_valid_credential_is_served_from_a_braked_address(limited: Api) -> None:
    session = await limited.session()
    path = f"/v1/sessions/{session.id}"
    guesses = [
        (await limited.key.get(path, headers={"Authorization": f"Bearer {BAD}{i}"})).status_code for i in range(5)
    ]
    assert guesses == [401] * 5
    # The address is braked now. A guess is answered 429, and only after a delay.
    loop = asyncio.get_running_loop()
    started = loop.time()
    braked = await limited.key.get(path, headers={"Authorization": f"Bearer {BAD}more"})
    assert loop.time() - started >= BRAKED_FAILURE_DELAY_S * 0.9
    assert braked.status_code == 429
    assert braked.json()["error"]["message"].startswith("too many failed sign-ins from this address")
    assert 1 <= int(braked.headers["Retry-After"]) <= 30
    # A session token never used before, and a key minted just now, from the same address: served, at once.
    fresh = await limited.session()
    minted = await limited.key.post("/v1/api-keys", json={"label": "new", "permissions": ["session.read"]})
    assert minted.status_code == 201
    started = loop.time()
    async with limited.as_session(fresh) as as_token, limited.stack.client(minted.json()["secret"]) as as_key:
        assert (await as_token.get(f"/v1/sessions/{fresh.id}")).status_code == 200
        assert (await as_key.get(f"/v1/sessions/{fresh.id}")).status_code == 200
    assert loop.time() - started < BRAKED_FAILURE_DELAY_S
    # And the guesses go on being braked.
    assert (await limited.key.get(path, headers={"Authorization": f"Bearer {BAD}again"})).status_code == 429


async def test_forwarded_addresses_count_only_from_a_trusted_proxy(limited: Api) -> None:
    # No proxy is trusted: X-Forwarded-For is the client's own say, and every guess counts for the peer.
    path = "/v1/sessions"
    statuses = []
    for i in range(6):
        headers = {"Authorization": f"Bearer {BAD}{i}", "X-Forwarded-For": f"198.51.100.{i}"}
        statuses.append((await limited.key.get(path, headers=headers)).status_code)
    assert statuses == [401] * 5 + [429]


@pytest.fixture
async def proxied(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    update: dict[str, object] = {
        "auth_failure_limit": 5,
        "auth_failure_window_s": 30.0,
        # The tests' client connects from the loopback: it plays the proxy.
        "trusted_proxies": "127.0.0.1, ::1",
    }
    async with running_api(settings, redis_url, api_key, update, worker=False) as api:
        yield api


async def guess(api: Api, forwarded_for: str, i: int) -> int:
    headers = {"Authorization": f"Bearer {BAD}{i}", "X-Forwarded-For": forwarded_for}
    return (await api.key.get("/v1/sessions", headers=headers)).status_code


async def test_behind_a_trusted_proxy_each_client_has_its_own_brake(proxied: Api) -> None:
    assert [await guess(proxied, "203.0.113.1", i) for i in range(6)] == [401] * 5 + [429]
    # Another client behind the same proxy is not braked by the first one's guesses.
    assert await guess(proxied, "203.0.113.2", 0) == 401
    # The address is the right-most one the proxy did not add itself: what the client wrote to the left
    # of it is not believed.
    spoofed = [await guess(proxied, f"198.51.100.{i}, 203.0.113.3", i) for i in range(6)]
    assert spoofed == [401] * 5 + [429]
    # A chain of trusted proxies is looked through to the client.
    assert await guess(proxied, "203.0.113.1, 127.0.0.1", 99) == 429
    assert (await proxied.key.get("/v1/sessions", headers={"X-Forwarded-For": "203.0.113.1"})).status_code == 200


@pytest.mark.parametrize("value", ["nginx", "10.0.0.1/8", "10.0.0.0/33", "127.0.0.1,,x"])
def test_trusted_proxies_must_be_addresses_or_networks(value: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(trusted_proxies=value)
    assert "trusted_proxies" in str(refused.value)
    assert "is not an IP address or a CIDR network" in str(refused.value)


def test_trusted_proxies_and_the_header_deadline_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().trusted_proxy_list == []
    assert Settings().header_timeout_s == 10
    monkeypatch.setenv("SWITCHBOARD_TRUSTED_PROXIES", " 10.1.0.0/16, ::1 ")
    monkeypatch.setenv("SWITCHBOARD_HEADER_TIMEOUT_S", "2.5")
    assert Settings().trusted_proxy_list == ["10.1.0.0/16", "::1"]
    assert Settings().header_timeout_s == 2.5
    monkeypatch.setenv("SWITCHBOARD_HEADER_TIMEOUT_S", "0")
    with pytest.raises(ValidationError, match="header_timeout_s"):
        Settings()
