"""Agents, versions, security, model providers, sessions and API keys: shapes, statuses, pages."""

from __future__ import annotations

import re
from typing import Any

from tests.api_client import Api
from tests.helpers import SCRIPTED_CONFIG

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


async def test_agent_lifecycle_and_versions(api: Api) -> None:
    created = await api.key.post("/v1/agents", json={"name": "helper"})
    assert created.status_code == 201
    agent = created.json()
    assert set(agent) == {"created_at", "id", "name", "workspace_id"}
    assert UUID.match(agent["id"])
    assert agent["created_at"].endswith("Z")
    renamed = await api.key.patch(f"/v1/agents/{agent['id']}", json={"name": "renamed"})
    assert renamed.json()["name"] == "renamed"
    assert (await api.key.get(f"/v1/agents/{agent['id'].upper()}")).json()["id"] == agent["id"]

    provider_id = await api.scripted_provider_id()
    body: dict[str, Any] = {"model_provider_id": provider_id, **SCRIPTED_CONFIG, "system_prompt": None}
    versions = [await api.key.post(f"/v1/agents/{agent['id']}/versions", json=body) for _ in range(2)]
    assert [v.status_code for v in versions] == [201, 201]
    assert [v.json()["version"] for v in versions] == [1, 2]
    # The config is echoed as given: no model_provider_id, explicit null kept, absent keys absent.
    assert versions[0].json()["config"] == {**SCRIPTED_CONFIG, "system_prompt": None}
    listed = (await api.key.get(f"/v1/agents/{agent['id']}/versions", params={"limit": 1})).json()
    assert [v["version"] for v in listed["items"]] == [2]
    assert listed["next_cursor"] == versions[1].json()["id"]

    # A well-formed body that disagrees with what is stored is a conflict, never a 404 (the agent exists).
    wrong_model = {**body, "model": {**SCRIPTED_CONFIG["model"], "model": "gpt"}}
    refused = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=wrong_model)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "conflict"
    assert "model.model" in refused.json()["error"]["message"]
    unknown = {**body, "model_provider_id": "01900000-0000-7000-8000-000000000000"}
    missing = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=unknown)
    assert missing.status_code == 409
    assert missing.json()["error"]["message"].startswith("model_provider_id: no model provider")
    anthropic = {**body, "model": {"format": "anthropic", "model": "scripted", "max_tokens": 100}}
    mismatch = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=anthropic)
    assert mismatch.status_code == 409
    assert "model.format" in mismatch.json()["error"]["message"]

    session = await api.session(agent["id"])
    assert (await api.key.delete(f"/v1/agents/{agent['id']}")).status_code == 204
    assert (await api.key.get(f"/v1/agents/{agent['id']}")).status_code == 404
    assert (await api.key.get(f"/v1/sessions/{session.id}")).status_code == 404


async def test_security_is_a_whole_document(api: Api) -> None:
    agent_id = await api.agent()
    path = f"/v1/agents/{agent_id}/security"
    assert (await api.key.get(path)).json() == {"allowed_origins": []}
    put = await api.key.put(path, json={"allowed_origins": ["https://app.example.com", "http://localhost:5173"]})
    assert put.json() == {"allowed_origins": ["https://app.example.com", "http://localhost:5173"]}
    assert (await api.key.put(path, json={"allowed_origins": None})).json() == {"allowed_origins": []}
    for bad in ("https://app.example.com/", "app.example.com", "https://x.com/path", "ftp://x.com"):
        answer = await api.key.put(path, json={"allowed_origins": [bad]})
        assert answer.status_code == 400, bad
        assert "allowed_origins[0]" in answer.json()["error"]["message"]
    too_many = [f"https://a{i}.example.com" for i in range(33)]
    assert (await api.key.put(path, json={"allowed_origins": too_many})).status_code == 400


async def test_providers_list_platform_and_byok_and_never_return_keys(api: Api) -> None:
    listed = (await api.key.get("/v1/model-providers")).json()
    scripted = next(p for p in listed["items"] if p["display_name"] == "Scripted")
    assert scripted["type"] == "platform"
    assert scripted["format"] == "openai_responses"
    assert [m["model"] for m in scripted["models"]] == ["scripted"]
    body = {
        "api_key": "sk-secret",
        "base_url": "https://api.openai.com/v1",
        "display_name": "Mine",
        "format": "openai_responses",
    }
    created = await api.key.post("/v1/model-providers", json=body)
    assert created.status_code == 201
    byok = created.json()
    assert byok["type"] == "byok"
    assert byok["workspace_id"] == api.stack.broker.workspace_id
    assert "sk-secret" not in created.text
    patched = await api.key.patch(
        f"/v1/model-providers/{byok['id']}", json={"display_name": "Renamed", "description": None}
    )
    assert patched.json()["display_name"] == "Renamed"
    everything = (await api.key.get("/v1/model-providers", params={"order": "asc"})).json()["items"]
    assert [p["id"] for p in everything] == [scripted["id"], byok["id"]]
    assert "sk-secret" not in str(everything)
    assert (await api.key.delete(f"/v1/model-providers/{scripted['id']}")).status_code == 409
    assert (await api.key.delete(f"/v1/model-providers/{byok['id']}")).status_code == 204
    assert (await api.key.get(f"/v1/model-providers/{byok['id']}")).status_code == 404


async def test_sessions_create_get_page_and_refusals(api: Api) -> None:
    agent_id = await api.agent()
    created = [await api.session(agent_id) for _ in range(5)]
    first = (await api.key.get(f"/v1/sessions/{created[0].id}")).json()
    assert first["status"] == "idle"
    assert first["created_by"]["type"] == "api_key"
    assert first["display_name"] == ""
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = (await api.key.get("/v1/sessions", params=params)).json()
        seen += [s["id"] for s in page["items"]]
        if page["next_cursor"] is None:
            break
        params["after"] = page["next_cursor"]
    assert seen == [s.id for s in reversed(created)]
    ascending = (await api.key.get("/v1/sessions", params={"order": "asc"})).json()
    assert [s["id"] for s in ascending["items"]] == [s.id for s in created]

    bare = (await api.key.post("/v1/agents", json={"name": "unpublished"})).json()
    unpublished = await api.key.post("/v1/sessions", json={"agent_id": bare["id"]})
    assert unpublished.status_code == 409
    assert "no published version" in unpublished.json()["error"]["message"]
    missing = await api.key.post("/v1/sessions", json={"agent_id": "01900000-0000-7000-8000-000000000000"})
    assert missing.status_code == 404
    vault = await api.key.post("/v1/sessions", json={"agent_id": agent_id, "vault_ids": [bare["id"]]})
    assert vault.status_code == 404
    assert (await api.key.get("/v1/sessions", params={"limit": 201})).status_code == 400


async def test_session_status_follows_the_active_run(api: Api) -> None:
    session = await api.session()
    await api.send(session, "/sleep 0.5")
    assert (await api.key.get(f"/v1/sessions/{session.id}")).json()["status"] == "active"
    await api.wait_for(session, lambda es: es[-1]["type"] == "run_completed")
    assert (await api.key.get(f"/v1/sessions/{session.id}")).json()["status"] == "idle"


async def test_api_key_shapes(api: Api) -> None:
    minted = (await api.key.post("/v1/api-keys", json={"label": "shape", "permissions": ["agent.read"]})).json()
    assert minted["secret"].startswith("swb_ak_")
    assert minted["prefix"] == minted["secret"][:15]
    listed = (await api.key.get("/v1/api-keys")).json()["items"]
    row = next(k for k in listed if k["id"] == minted["id"])
    assert set(row) == {
        "created_at", "created_by", "expires_at", "id", "label", "last_used_at", "permissions", "prefix", "revoked_at"
    }  # fmt: skip
    assert set(row["created_by"]) == {"display_name", "primary_email", "user_id"}
    assert "secret" not in row
