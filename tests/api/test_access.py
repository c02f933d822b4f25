"""Who may call what: API keys by permission, session tokens only on their own session's routes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.api_client import Api


async def test_missing_malformed_and_unknown_credentials_are_401(api: Api) -> None:
    url = api.stack.url
    async with httpx.AsyncClient(base_url=url) as anonymous:
        answers = [
            await anonymous.get("/v1/sessions"),
            await anonymous.get("/v1/sessions", headers={"Authorization": "Basic abc"}),
            await anonymous.get("/v1/sessions", headers={"Authorization": "Bearer nonsense"}),
            await anonymous.get("/v1/sessions", headers={"Authorization": "Bearer swb_ak_" + "x" * 43}),
            await anonymous.get("/v1/sessions", headers={"Authorization": "Bearer swb_st_" + "0" * 70}),
        ]
    for answer in answers:
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["code"] == "unauthorized"


async def mint(api: Api, *permissions: str, expires_at: str | None = None) -> str:
    body: dict[str, object] = {"label": "test", "permissions": list(permissions)}
    if expires_at:
        body["expires_at"] = expires_at
    answer = await api.key.post("/v1/api-keys", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["secret"])


async def test_permissions_are_enforced_per_route(api: Api) -> None:
    reader = api.stack.client(await mint(api, "session.read", "agent.read"))
    async with reader:
        assert (await reader.get("/v1/sessions")).status_code == 200
        assert (await reader.get("/v1/agents")).status_code == 200
        refused = await reader.post("/v1/agents", json={"name": "x"})
        assert refused.status_code == 403
        assert refused.json()["error"] == {
            "code": "forbidden",
            "message": "this API key lacks the permission agent.publish",
        }
        assert (await reader.get("/v1/model-providers")).status_code == 403
        escalate = await reader.post("/v1/api-keys", json={"label": "x", "permissions": ["session.manage"]})
        assert escalate.status_code == 403


async def test_revoked_and_expired_keys_are_401(api: Api) -> None:
    secret = await mint(api, "session.read")
    listed = (await api.key.get("/v1/api-keys")).json()["items"]
    key_id = next(k["id"] for k in listed if k["prefix"] == secret[:15])
    revoked = await api.key.delete(f"/v1/api-keys/{key_id}")
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    soon = (datetime.now(UTC) + timedelta(milliseconds=1500)).isoformat()
    expiring = await mint(api, "session.read", expires_at=soon)
    async with api.stack.client(secret) as gone, api.stack.client(expiring) as brief:
        assert (await gone.get("/v1/sessions")).status_code == 401
        assert (await brief.get("/v1/sessions")).status_code == 200
        await asyncio.sleep(1.6)
        assert (await brief.get("/v1/sessions")).status_code == 401


async def test_a_session_token_reaches_only_its_own_session(api: Api) -> None:
    mine, theirs = await api.session(), await api.session()
    async with api.as_session(mine) as client:
        assert (await client.get(f"/v1/sessions/{mine.id}")).status_code == 200
        assert (await client.get(f"/v1/sessions/{mine.id}/events")).status_code == 200
        for path in (f"/v1/sessions/{theirs.id}", f"/v1/sessions/{theirs.id}/events"):
            answer = await client.get(path)
            assert answer.status_code == 404
            assert theirs.id in answer.json()["error"]["message"]
        post = await client.post(f"/v1/sessions/{theirs.id}/events", json={"type": "input", "text": "x"})
        assert post.status_code == 404
        for method, path in [
            ("GET", "/v1/sessions"),
            ("GET", "/v1/agents"),
            ("DELETE", f"/v1/sessions/{mine.id}"),
            ("POST", f"/v1/sessions/{mine.id}/tokens"),
        ]:
            answer = await client.request(method, path)
            assert answer.status_code == 403, (method, path)
            assert "needs an API key" in answer.json()["error"]["message"]
    # Nothing of the other session leaked into this one's log.
    assert all(theirs.id not in str(e) for e in await api.events(mine))


async def test_a_deleted_sessions_token_gets_404(api: Api) -> None:
    session = await api.session()
    assert (await api.key.delete(f"/v1/sessions/{session.id}")).status_code == 204
    async with api.as_session(session) as client:
        assert (await client.get(f"/v1/sessions/{session.id}")).status_code == 404
        assert (await client.get(f"/v1/sessions/{session.id}/events/stream")).status_code == 404


@pytest.mark.parametrize("header_value", ["01900000-0000-7000-8000-000000000000", "not-a-uuid"])
async def test_another_workspace_is_403(api: Api, header_value: str) -> None:
    answer = await api.key.get("/v1/sessions", headers={"Kikuvi-Workspace": header_value})
    assert answer.status_code == 403
    own = api.stack.broker.workspace_id
    assert (await api.key.get("/v1/sessions", headers={"Kikuvi-Workspace": own.upper()})).status_code == 200


async def test_routes_out_of_scope_say_so(api: Api) -> None:
    for path in ("/v1/vaults", "/v1/workspaces", "/v1/skills", "/v1/organization"):
        answer = await api.key.get(path)
        assert answer.status_code == 404
        assert answer.json()["error"] == {"code": "not_found", "message": f"no route {path} is provided by this server"}
