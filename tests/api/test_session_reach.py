"""The session a route acts on (`api.deps.session_for`): who may reach it is settled before what was sent.

A caller that may not reach a session learns that (404; 403 for an API key lacking the permission)
whatever its body or query says, and a caller that may reach it is told how its request is malformed."""

from __future__ import annotations

import re

import httpx

from broker.services.credentials import PERMISSIONS
from tests.api_client import Api

BAD_INPUT = {"type": "input", "text": 42}
SESSION_PATH = re.compile(r"\{(\w+)(?::\w+)?\}")


async def _key_without(api: Api, permission: str) -> str:
    others = [p for p in PERMISSIONS if p != permission]
    minted = await api.key.post("/v1/api-keys", json={"label": f"no {permission}", "permissions": others})
    assert minted.status_code == 201, minted.text
    return str(minted.json()["secret"])


def _refused(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code, answer.text


async def test_a_malformed_body_to_a_session_out_of_reach_is_refused_for_the_session(api: Api) -> None:
    mine, theirs = await api.session(), await api.session()
    unknown = "01a230c4-d956-7bfc-b2f1-a1945f9dfded"
    async with api.as_session(mine) as token:
        _refused(await token.post(f"/v1/sessions/{theirs.id}/events", json=BAD_INPUT), 404, "not_found")
        _refused(await token.post(f"/v1/sessions/{mine.id}/events", json=BAD_INPUT), 400, "invalid_request")
    _refused(await api.key.post(f"/v1/sessions/{unknown}/events", json=BAD_INPUT), 404, "not_found")
    _refused(await api.key.post(f"/v1/sessions/{mine.id}/events", json=BAD_INPUT), 400, "invalid_request")
    async with api.stack.client(await _key_without(api, "session.manage")) as lacking:
        _refused(await lacking.post(f"/v1/sessions/{mine.id}/events", json=BAD_INPUT), 403, "forbidden")
    assert all(e["type"] != "input" for e in await api.events(mine))


async def test_a_malformed_query_to_a_session_out_of_reach_is_refused_for_the_session(api: Api) -> None:
    mine, theirs = await api.session(), await api.session()
    async with api.as_session(mine) as token:
        _refused(await token.get(f"/v1/sessions/{theirs.id}/events", params={"limit": 0}), 404, "not_found")
        _refused(await token.get(f"/v1/sessions/{mine.id}/events", params={"limit": 0}), 400, "invalid_request")
    async with api.stack.client(await _key_without(api, "session.read")) as lacking:
        _refused(await lacking.get(f"/v1/sessions/{mine.id}/events", params={"limit": 0}), 403, "forbidden")


async def test_a_session_token_may_not_mint_tokens_for_any_session(api: Api) -> None:
    mine, theirs = await api.session(), await api.session()
    async with api.as_session(mine) as token:
        for session in (mine, theirs):
            answer = await token.post(f"/v1/sessions/{session.id}/tokens")
            _refused(answer, 403, "forbidden")
            assert "needs an API key" in answer.json()["error"]["message"]


async def test_the_document_lists_path_parameters_in_the_order_of_the_path(api: Api) -> None:
    # A route takes its session as a dependency, whose path parameters FastAPI would list after the
    # route's own; a route with more path parameters names `session_id` first to keep the path's order.
    document = (await api.key.get("/openapi.json")).json()
    for path, operations in document["paths"].items():
        named = SESSION_PATH.findall(path)
        for method, operation in operations.items():
            listed = [p["name"] for p in operation.get("parameters", []) if p["in"] == "path"]
            assert listed == named, (method, path, listed)
