"""A workspace provider's address is checked when it is created or moved and again on every connection:
loopback, private, link-local and other non-public addresses only with SWITCHBOARD_PROVIDER_ALLOW_PRIVATE,
metadata addresses never, a name that changes its answer after the check (DNS rebinding) refused at the
connection, no redirect followed; the platform providers' URLs are the operator's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from common.addresses import system_resolver
from switchboard.settings import Settings
from tests.api.test_providers import GPT
from tests.api_client import Api, Session, of_type, run_over, running_api
from tests.fakes import FakeProvider, Reply, fake_provider, openai_stream
from tests.resolver import PUBLIC, Names

SETTING = "SWITCHBOARD_PROVIDER_ALLOW_PRIVATE"
# Every one of these is refused by default (no DNS is asked: literals, and localhost from the hosts file).
PRIVATE = [
    "http://127.0.0.1:9000/v1",
    "http://127.1/v1",
    "http://2130706433/v1",
    "http://localhost:8000/v1",
    "http://10.1.2.3/v1",
    "https://172.16.0.1",
    "https://192.168.1.1/v1",
    "http://100.64.0.1/v1",
    "http://169.254.10.1/v1",
    "http://0.0.0.0:8000/v1",
    "http://224.0.0.1/v1",
    "http://240.0.0.1/v1",
    "http://[::1]:8000/v1",
    "http://[::ffff:127.0.0.1]/v1",
    "http://[::ffff:10.0.0.1]/v1",
    "http://[fe80::1]/v1",
    "http://[fd12:3456::1]/v1",
    "http://[::]/v1",
]
# Refused even with the setting.
METADATA = [
    "http://169.254.169.254/latest",
    "http://[fd00:ec2::254]/latest",
    "http://[::ffff:169.254.169.254]/latest",
    "http://[::ffff:a9fe:a9fe]/latest",
]


def body(base_url: str, api_key: str = "sk-test") -> dict[str, Any]:
    return {"api_key": api_key, "base_url": base_url, "display_name": "p", "format": "openai_responses"}


async def session_of(api: Api, provider_id: str) -> Session:
    agent = (await api.key.post("/v1/agents", json={"name": "byok"})).json()
    version = {"model_provider_id": provider_id, "model": GPT}
    assert (await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
    return await api.session(agent["id"])


async def run_failure(api: Api, provider_id: str) -> str:
    session = await session_of(api, provider_id)
    await api.send(session, "hello")
    events = await api.wait_for(session, run_over)
    failed = of_type(events, "run_failed")
    assert failed, [e["type"] for e in events]
    error: str = failed[0]["error"]
    return error


async def test_private_addresses_are_refused_at_creation_and_on_a_move_by_default(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    async with running_api(settings, redis_url, api_key, {}, worker=False, resolver=system_resolver) as api:
        for url in PRIVATE + METADATA:
            answer = await api.key.post("/v1/model-providers", json=body(url))
            assert answer.status_code == 400, (url, answer.text)
            message = answer.json()["error"]["message"]
            assert message.startswith("base_url: "), message
            assert SETTING in message or "metadata" in message, message
        created = await api.key.post("/v1/model-providers", json=body(f"http://{PUBLIC}/v1"))
        assert created.status_code == 201, created.text
        path = f"/v1/model-providers/{created.json()['id']}"
        moved = await api.key.patch(path, json={"base_url": "http://10.0.0.1/v1", "api_key": "sk-2"})
        assert moved.status_code == 400, moved.text
        assert SETTING in moved.json()["error"]["message"]
        stored = await api.stack.broker.providers.get(created.json()["id"])
        assert (stored.base_url, stored.api_key) == (f"http://{PUBLIC}/v1", "sk-test")
        listed = (await api.key.get("/v1/model-providers")).json()["items"]
        assert [p["id"] for p in listed if p["type"] == "byok"] == [created.json()["id"]]


async def test_the_setting_allows_private_addresses_but_never_metadata(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    update: dict[str, object] = {"provider_allow_private": True}
    async with running_api(settings, redis_url, api_key, update, worker=False, resolver=system_resolver) as api:
        for url in PRIVATE:
            answer = await api.key.post("/v1/model-providers", json=body(url))
            assert answer.status_code == 201, (url, answer.text)
        for url in METADATA:
            answer = await api.key.post("/v1/model-providers", json=body(url))
            assert answer.status_code == 400, (url, answer.text)
            assert "a cloud metadata address" in answer.json()["error"]["message"]


async def test_a_name_is_refused_when_any_of_its_addresses_is(settings: Settings, redis_url: str, api_key: str) -> None:
    names = Names({"mixed.example": [PUBLIC, "10.0.0.7"], "public.example": [PUBLIC, "2606:4700::1111"]})
    async with running_api(settings, redis_url, api_key, {}, worker=False, resolver=names) as api:
        refused = await api.key.post("/v1/model-providers", json=body("https://mixed.example/v1"))
        assert refused.status_code == 400
        message = refused.json()["error"]["message"]
        assert message.startswith("base_url: mixed.example resolves to 10.0.0.7, a private address"), message
        assert SETTING in message
        assert (await api.key.post("/v1/model-providers", json=body("https://public.example/v1"))).status_code == 201


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://", "with a host"),
        ("http:///v1", "with a host"),
        ("https://user:secret@llm.example/v1", "must not carry a user or password"),
        ("https://llm.example:99999/v1", "not a URL this server can use"),
        ("https://[::1/v1", "not a URL this server can use"),
    ],
)
async def test_a_base_url_without_a_usable_host_is_400(api: Api, url: str, words: str) -> None:
    answer = await api.key.post("/v1/model-providers", json=body(url))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"
    message = answer.json()["error"]["message"]
    assert message.startswith("base_url: "), message
    assert words in message, message


async def test_a_name_that_does_not_resolve_is_taken_and_its_runs_fail_saying_so(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    # Created (it may resolve later, or only where the workers are), then checked on every connection.
    names = Names()
    async with running_api(settings, redis_url, api_key, {}, resolver=names) as api:
        created = await api.key.post("/v1/model-providers", json=body("https://nowhere.invalid/v1"))
        assert created.status_code == 201, created.text
        error = await run_failure(api, created.json()["id"])
    assert "could not be reached" in error, error
    assert "nowhere.invalid could not be resolved" in error, error
    assert names.asked.count("nowhere.invalid") >= 2


class SlowNames(Names):
    async def __call__(self, host: str, port: int) -> list[str]:
        if host == "slow.example":
            await asyncio.sleep(30)
        return await super().__call__(host, port)


async def test_a_name_slow_to_resolve_holds_its_request_no_longer_than_the_timeout_and_nothing_else(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    update: dict[str, object] = {"provider_resolve_timeout_s": 1.5}
    async with running_api(settings, redis_url, api_key, update, worker=False, resolver=SlowNames()) as api:
        started = time.monotonic()
        creating = asyncio.create_task(api.key.post("/v1/model-providers", json=body("https://slow.example/v1")))
        await asyncio.sleep(0.1)
        # Another request meanwhile is served while the lookup still waits: nothing queues behind it.
        assert (await api.key.get("/v1/model-providers")).status_code == 200
        assert not creating.done()
        created = await creating
        elapsed = time.monotonic() - started
    # Not resolved in time: taken as a name that does not resolve (checked again on each connection).
    assert created.status_code == 201, created.text
    assert 1.4 < elapsed < 4, elapsed


async def test_a_name_that_rebinds_to_the_loopback_after_its_check_is_refused_on_connection(
    settings: Settings, redis_url: str, api_key: str, fake: FakeProvider
) -> None:
    port = fake.url.rsplit(":", 1)[1]
    names = Names({"rebind.example": [PUBLIC]})
    fake.replies = [Reply(frames=openai_stream({"type": "message", "text": "should never be asked"}))]
    async with running_api(settings, redis_url, api_key, {}, resolver=names) as api:
        created = await api.key.post("/v1/model-providers", json=body(f"http://rebind.example:{port}/v1"))
        assert created.status_code == 201, created.text
        names.answers["rebind.example"] = ["127.0.0.1"]
        error = await run_failure(api, created.json()["id"])
    assert error.startswith("the model provider's address is refused: rebind.example resolves to 127.0.0.1"), error
    assert SETTING in error
    assert fake.requests == []


async def test_the_connection_goes_to_the_address_that_was_checked(
    settings: Settings, redis_url: str, api_key: str, fake: FakeProvider
) -> None:
    # rebind.example exists only in this test's table: the run reaches the fake only because the
    # connection is made to the address the check saw (with the setting, the loopback is allowed).
    port = fake.url.rsplit(":", 1)[1]
    names = Names({"rebind.example": ["127.0.0.1"]})
    fake.replies = [Reply(frames=openai_stream({"type": "message", "text": "reached"}))]
    update: dict[str, object] = {"provider_allow_private": True}
    async with running_api(settings, redis_url, api_key, update, resolver=names) as api:
        created = await api.key.post("/v1/model-providers", json=body(f"http://rebind.example:{port}/v1"))
        session = await session_of(api, created.json()["id"])
        await api.send(session, "hello")
        events = await api.wait_for(session, run_over)
    assert of_type(events, "run_completed"), events
    (sent,) = fake.requests
    assert sent["headers"]["host"] == f"rebind.example:{port}"
    assert sent["headers"]["authorization"] == "Bearer sk-test"


async def test_a_redirect_is_not_followed_so_the_key_stays_at_its_address(
    settings: Settings, redis_url: str, api_key: str, fake: FakeProvider
) -> None:
    async with fake_provider() as elsewhere:
        fake.replies = [Reply(307, {}, headers={"location": f"{elsewhere.url}/v1/responses"})]
        update: dict[str, object] = {"provider_allow_private": True}
        async with running_api(settings, redis_url, api_key, update) as api:
            created = await api.key.post("/v1/model-providers", json=body(f"{fake.url}/v1"))
            error = await run_failure(api, created.json()["id"])
        assert elsewhere.requests == []
    assert len(fake.requests) == 1
    assert error == "the OpenAI API refused the request (307 error): Temporary Redirect", error
