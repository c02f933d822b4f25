"""Browsers: a session's routes answer other origins only as its agent allows; the rest not at all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from switchboard.settings import Settings
from tests.api_client import Api, Session, running_api

APP = "https://app.example"
OTHER = "https://evil.example"


async def allow(api: Api, agent_id: str, *origins: str) -> None:
    answer = await api.key.put(f"/v1/agents/{agent_id}/security", json={"allowed_origins": list(origins)})
    assert answer.status_code == 200, answer.text


async def allowed_session(api: Api) -> Session:
    session = await api.session()
    await allow(api, session.agent_id, APP)
    return session


async def test_an_allowed_origin_gets_a_preflight_and_headers_naming_it(api: Api) -> None:
    session = await allowed_session(api)
    path = f"/v1/sessions/{session.id}/events"
    preflight = {
        "Origin": APP,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    answer = await api.key.options(path, headers=preflight)
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == APP
    assert answer.headers["vary"] == "Origin"
    assert "POST" in answer.headers["access-control-allow-methods"]
    for header in ("Authorization", "Idempotency-Key", "Last-Event-ID", "Content-Type"):
        assert header in answer.headers["access-control-allow-headers"]
    assert "access-control-allow-credentials" not in answer.headers
    async with api.as_session(session) as http:
        sent = await http.post(path, json={"type": "input", "text": "hello"}, headers={"Origin": APP})
        assert sent.status_code == 200
        assert sent.headers["access-control-allow-origin"] == APP
        listed = await http.get(path, headers={"Origin": APP})
        assert listed.status_code == 200
        assert listed.headers["access-control-allow-origin"] == APP
        async with http.stream("GET", f"{path}/stream", headers={"Origin": APP}) as stream:
            assert stream.status_code == 200
            assert stream.headers["access-control-allow-origin"] == APP


async def test_another_origin_is_refused_before_anything_is_done(api: Api) -> None:
    session = await allowed_session(api)
    path = f"/v1/sessions/{session.id}/events"
    preflight = await api.key.options(path, headers={"Origin": OTHER, "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers
    before = await api.events(session)
    async with api.as_session(session) as http:
        sent = await http.post(path, json={"type": "input", "text": "hello"}, headers={"Origin": OTHER})
    assert sent.status_code == 403
    assert "access-control-allow-origin" not in sent.headers
    assert sent.json()["error"] == {
        "code": "forbidden",
        "message": f"origin {OTHER} may not call this route: "
        "it is not among the allowed origins of this session's agent",
    }
    assert await api.events(session) == before
    web = await api.register(session)
    async with api.as_session(session) as http:
        ping = await http.post(f"/v1/sessions/{session.id}/clients/{web['id']}/ping", headers={"Origin": OTHER})
    assert ping.status_code == 403  # the fast lane is behind the same check


async def test_no_origin_is_allowed_by_default_and_requests_without_origin_are_unaffected(api: Api) -> None:
    session = await api.session()
    async with api.as_session(session) as http:
        refused = await http.get(f"/v1/sessions/{session.id}", headers={"Origin": APP})
        plain = await http.get(f"/v1/sessions/{session.id}")
    assert refused.status_code == 403
    assert plain.status_code == 200
    assert "access-control-allow-origin" not in plain.headers


async def test_the_apis_own_origin_is_same_origin(api: Api) -> None:
    session = await api.session()
    own = api.stack.url
    async with api.as_session(session) as http:
        answer = await http.get(f"/v1/sessions/{session.id}", headers={"Origin": own})
    assert answer.status_code == 200
    assert "access-control-allow-origin" not in answer.headers


async def test_routes_outside_a_session_refuse_other_origins(api: Api) -> None:
    session = await allowed_session(api)
    for path in ("/v1/agents", "/v1/sessions", f"/v1/agents/{session.agent_id}"):
        answer = await api.key.get(path, headers={"Origin": APP})
        assert answer.status_code == 403, path
        assert "only a session's routes answer other origins" in answer.json()["error"]["message"]


async def test_a_change_of_allowed_origins_applies_within_two_seconds(api: Api) -> None:
    session = await allowed_session(api)
    path = f"/v1/sessions/{session.id}"
    async with api.as_session(session) as http:
        assert (await http.get(path, headers={"Origin": APP})).status_code == 200
        await allow(api, session.agent_id, OTHER)
        await asyncio.sleep(2.1)
        assert (await http.get(path, headers={"Origin": APP})).status_code == 403
        assert (await http.get(path, headers={"Origin": OTHER})).status_code == 200


async def test_same_origin_means_the_same_scheme_too(api: Api) -> None:
    host = api.stack.url.removeprefix("http://")
    own = await api.key.get("/v1/agents", headers={"Origin": f"http://{host}"})
    assert own.status_code == 200
    # The API's host and port, but https: another origin (a page there is not the API's own).
    other = await api.key.get("/v1/agents", headers={"Origin": f"https://{host}"})
    assert other.status_code == 403
    # X-Forwarded-Proto from a peer that is no trusted proxy changes nothing.
    claimed = {"Origin": f"https://{host}", "X-Forwarded-Proto": "https"}
    assert (await api.key.get("/v1/agents", headers=claimed)).status_code == 403
    # A default port is the same port whether or not it is written.
    assert (
        await api.key.get("/v1/agents", headers={"Origin": "http://a.example", "Host": "a.example:80"})
    ).status_code == 200
    assert (
        await api.key.get("/v1/agents", headers={"Origin": "http://a.example:8080", "Host": "a.example"})
    ).status_code == 403


@pytest.fixture
async def proxied(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    update: dict[str, object] = {"trusted_proxies": "127.0.0.1/32"}
    async with running_api(settings, redis_url, api_key, update, worker=False) as api:
        yield api


async def test_behind_a_trusted_proxy_the_scheme_is_the_forwarded_one(proxied: Api) -> None:
    tls = {"X-Forwarded-Proto": "https", "Host": "switchboard.example"}
    assert (
        await proxied.key.get("/v1/agents", headers={**tls, "Origin": "https://switchboard.example"})
    ).status_code == 200
    assert (
        await proxied.key.get("/v1/agents", headers={**tls, "Origin": "https://switchboard.example:443"})
    ).status_code == 200
    refused = await proxied.key.get("/v1/agents", headers={**tls, "Origin": "http://switchboard.example"})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"


async def test_the_mcp_endpoints_preflight_allows_mcps_headers_and_a_tools_param_headers(api: Api) -> None:
    session = await allowed_session(api)
    asked = "authorization, content-type, mcp-method, mcp-name, mcp-protocol-version, mcp-param-region, x-other"
    for path in (f"/v1/sessions/{session.id}/mcp", f"/v1/sessions/{session.id}/mcp/web"):
        preflight = {"Origin": APP, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": asked}
        answer = await api.key.options(path, headers=preflight)
        assert answer.status_code == 204
        allowed = {name.strip().lower() for name in answer.headers["access-control-allow-headers"].split(",")}
        assert {"mcp-method", "mcp-name", "mcp-protocol-version", "mcp-param-region", "authorization"} <= allowed
        # Only a tool's parameter headers are taken from the preflight, and only a bounded number of them.
        assert "x-other" not in allowed
    many = ", ".join(f"mcp-param-p{index}" for index in range(100))
    preflight = {"Origin": APP, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": many}
    answer = await api.key.options(f"/v1/sessions/{session.id}/mcp", headers=preflight)
    assert (
        sum(name.strip().startswith("mcp-param-") for name in answer.headers["access-control-allow-headers"].split(","))
        == 32
    )
    # Elsewhere the list stays the API's own.
    preflight = {"Origin": APP, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": asked}
    answer = await api.key.options(f"/v1/sessions/{session.id}/events", headers=preflight)
    assert "Mcp-Method" not in answer.headers["access-control-allow-headers"]
