"""Every route times every kind of credential: the right refusal, and nothing of another session in it.

The table below states what each route needs (the contract), rather than reading it off the code; a
test checks that it lists every route the OpenAPI document has, so a new route cannot go unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import httpx
import pytest

from broker.services.credentials import PERMISSIONS, token_fields, token_record
from common.codec import sha256_hex
from tests.api_client import Api, Session, of_type
from tests.helpers import HIGHLIGHT, SCRIPTED_MODEL_CONFIG
from tests.stack import Stack

Kind = Literal["key", "session"]
MARKER = "MARKER-of-session-A-do-not-leak"


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    kind: Kind  # "session": a session token of its own session may call it; "key": API keys only
    permission: str
    body: dict[str, Any] | None = None


TOOLS = {"tools": [HIGHLIGHT]}
# Valid bodies, so what decides each answer is the credential alone.
VERSION = {"model_provider_id": "{scripted_provider_id}", "model": SCRIPTED_MODEL_CONFIG}
PROVIDER = {"display_name": "x", "format": "anthropic", "base_url": "https://llm.example", "api_key": "sk-x"}
REGISTER = {"name": "m", "lifetime": {"type": "never"}, "tools": [HIGHLIGHT]}
AG_UI = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]}
AI_SDK = {"id": "c", "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
WEBHOOK = {"url": "https://hooks.example/in", "events": ["run.completed"]}
SCHEDULE = {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin", "text": MARKER}
ASK_PAGE = {"message": "Sign in", "url": "https://example.com/sign-in"}
CANCEL = {"action": "cancel"}
ROUTES = [
    # A key mints and revokes only keys whose permissions it holds: what it must hold is the target's.
    Route("POST", "/v1/api-keys", "key", "session.read", {"label": "x", "permissions": ["session.read"]}),
    Route("GET", "/v1/api-keys", "key", "workspace.read"),
    Route("DELETE", "/v1/api-keys/{api_key_id}", "key", "session.read"),
    Route("POST", "/v1/agents", "key", "agent.publish", {"name": "x"}),
    Route("GET", "/v1/agents", "key", "agent.read"),
    Route("GET", "/v1/agents/{agent_id}", "key", "agent.read"),
    Route("PATCH", "/v1/agents/{agent_id}", "key", "agent.publish", {"name": "y"}),
    Route("DELETE", "/v1/agents/{agent_id}", "key", "agent.delete"),
    Route("POST", "/v1/agents/{agent_id}/versions", "key", "agent.publish", VERSION),
    Route("GET", "/v1/agents/{agent_id}/versions", "key", "agent.read"),
    Route("GET", "/v1/agents/{agent_id}/security", "key", "agent.read"),
    Route("PUT", "/v1/agents/{agent_id}/security", "key", "agent.publish", {"allowed_origins": []}),
    Route("GET", "/v1/model-providers", "key", "model_provider.read"),
    Route("POST", "/v1/model-providers", "key", "model_provider.manage", PROVIDER),
    Route("GET", "/v1/model-providers/{provider_id}", "key", "model_provider.read"),
    Route("PATCH", "/v1/model-providers/{provider_id}", "key", "model_provider.manage", {"display_name": "y"}),
    Route("DELETE", "/v1/model-providers/{provider_id}", "key", "model_provider.manage"),
    Route("POST", "/v1/sessions", "key", "session.create", {"agent_id": "{agent_id}"}),
    Route("GET", "/v1/sessions", "key", "session.read"),
    Route("GET", "/v1/inbox", "key", "session.read"),
    Route("GET", "/v1/sessions/{session_id}", "session", "session.read"),
    Route("DELETE", "/v1/sessions/{session_id}", "key", "session.manage"),
    Route("POST", "/v1/sessions/{session_id}/cancel", "session", "session.manage"),
    Route("POST", "/v1/sessions/{session_id}/tokens", "key", "session.manage"),
    Route("POST", "/v1/sessions/{session_id}/events", "session", "session.manage", {"type": "input", "text": "hi"}),
    Route("GET", "/v1/sessions/{session_id}/events", "session", "session.read"),
    Route("GET", "/v1/sessions/{session_id}/events/stream", "session", "session.read"),
    Route("POST", "/v1/sessions/{session_id}/schedules", "session", "session.manage", SCHEDULE),
    Route("GET", "/v1/sessions/{session_id}/schedules", "session", "session.read"),
    Route("DELETE", "/v1/sessions/{session_id}/schedules/{schedule_id}", "session", "session.manage"),
    Route("GET", "/v1/sessions/{session_id}/clients", "session", "session.read"),
    Route("POST", "/v1/sessions/{session_id}/clients", "session", "session.manage", REGISTER),
    Route("POST", "/v1/sessions/{session_id}/clients/{client_id}/ping", "session", "session.manage"),
    Route("DELETE", "/v1/sessions/{session_id}/clients/{client_id}", "session", "session.manage"),
    Route("PUT", "/v1/sessions/{session_id}/clients/{client_id}/tools", "session", "session.manage", TOOLS),
    Route("POST", "/v1/sessions/{session_id}/clients/{client_id}/calls/{call_id}/ack", "session", "session.manage"),
    Route(
        "POST",
        "/v1/sessions/{session_id}/clients/{client_id}/calls/{call_id}/result",
        "session",
        "session.manage",
        {"text": "x"},
    ),
    Route(
        "POST", "/v1/sessions/{session_id}/clients/{client_id}/calls/{call_id}/progress", "session", "session.manage"
    ),
    Route("GET", "/v1/sessions/{session_id}/clients/{client_id}/calls/stream", "session", "session.manage"),
    Route(
        "POST",
        "/v1/sessions/{session_id}/clients/{client_id}/calls/{call_id}/input-requests",
        "session",
        "session.manage",
        ASK_PAGE,
    ),
    Route("POST", "/v1/sessions/{session_id}/input-requests/{request_id}", "session", "session.manage", CANCEL),
    Route("GET", "/v1/sessions/{session_id}/input-requests/{request_id}", "session", "session.read"),
    Route("POST", "/v1/sessions/{session_id}/approvals/{call_id}", "session", "session.manage", {"decision": "allow"}),
    Route(
        "POST", "/v1/sessions/{session_id}/mcp-authorizations/{authorization_id}/decline", "session", "session.manage"
    ),
    Route("POST", "/v1/sessions/{session_id}/calls/{call_id}/cancel", "session", "session.manage"),
    Route("POST", "/v1/sessions/{session_id}/ag-ui", "session", "session.manage", AG_UI),
    Route("POST", "/v1/sessions/{session_id}/ai-sdk/chat", "session", "session.manage", AI_SDK),
    Route("GET", "/v1/sessions/{session_id}/ai-sdk/chat/{chat_id}/stream", "session", "session.manage"),
    Route("POST", "/v1/webhooks", "key", "session.manage", WEBHOOK),
    Route("GET", "/v1/webhooks", "key", "session.manage"),
    Route("GET", "/v1/webhooks/{webhook_id}", "key", "session.manage"),
    Route("PATCH", "/v1/webhooks/{webhook_id}", "key", "session.manage", {"description": "y"}),
    Route("DELETE", "/v1/webhooks/{webhook_id}", "key", "session.manage"),
    Route("POST", "/v1/webhooks/{webhook_id}/rotate-secret", "key", "session.manage"),
    Route("POST", "/v1/webhooks/{webhook_id}/test", "key", "session.manage"),
    Route("GET", "/v1/webhooks/{webhook_id}/deliveries", "key", "session.manage"),
    Route("GET", "/v1/mcp/connections", "key", "session.read"),
    Route("DELETE", "/v1/mcp/connections/{connection_id}", "key", "session.manage"),
    Route("POST", "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry", "key", "session.manage"),
]
PUBLIC = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/metrics/cluster"),
    ("GET", "/v1/mcp/oauth/client-metadata.json"),
    ("GET", "/v1/mcp/oauth/callback"),
}


@dataclass
class World:
    """Session A (the one every route is aimed at), session B (a stranger), and credentials of each kind."""

    ids: dict[str, str]
    a: Session
    b: Session
    keys_lacking: dict[str, str]
    revoked_key: str
    expired_token: str


async def _world(api: Api, stack: Stack) -> World:
    a = await api.session()
    b = await api.session()
    web = await api.register(a)
    await api.send(a, f'{MARKER}\n/call client__web__highlight_row {{"row_id": "{MARKER}"}}')
    events = await api.wait_for(a, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call_id = of_type(events, "client_tool_dispatched")[0]["call_id"]
    keys_lacking = {}
    for permission in {route.permission for route in ROUTES}:
        others = [p for p in PERMISSIONS if p != permission]
        minted = await api.key.post("/v1/api-keys", json={"label": f"no {permission}", "permissions": others})
        keys_lacking[permission] = minted.json()["secret"]
    spare = (await api.key.post("/v1/api-keys", json={"label": "spare", "permissions": ["session.read"]})).json()
    doomed = (await api.key.post("/v1/api-keys", json={"label": "doomed", "permissions": list(PERMISSIONS)})).json()
    assert (await api.key.delete(f"/v1/api-keys/{doomed['id']}")).status_code == 200
    # A token of session A whose lifetime is over (its record says so; waiting a day is not a test).
    minted = (await api.key.post(f"/v1/sessions/{a.id}/tokens")).json()
    expired = minted["session_token"]
    tokens = stack.broker.core.keys.session(a.id).tokens
    redis = stack.broker.core.redis
    stored: bytes = await redis.hget(tokens, sha256_hex(expired)) or b""
    token_id, _ = token_fields(stored)
    await redis.hset(tokens, sha256_hex(expired), token_record(token_id, 1))
    schedule = (await api.key.post(f"/v1/sessions/{a.id}/schedules", json=SCHEDULE)).json()
    ids = {
        "session_id": a.id,
        "client_id": web["id"],
        "call_id": call_id,
        "agent_id": a.agent_id,
        "api_key_id": spare["id"],
        "provider_id": "01a22b9d-0000-7000-8000-000000000000",
        "scripted_provider_id": await api.scripted_provider_id(),
        "chat_id": "chat-1",
        "webhook_id": "01a22b9d-0000-7000-8000-000000000001",
        "connection_id": "01a22b9d-0000-7000-8000-000000000002",
        "delivery_id": "msg_" + "0" * 32,
        "schedule_id": schedule["id"],
        "request_id": "01a22b9d-0000-7000-8000-000000000002",
        "authorization_id": "01a22b9d-0000-7000-8000-000000000003",
    }
    return World(ids, a, b, keys_lacking, doomed["secret"], expired)


def _body(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {key: _body(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [_body(item, ids) for item in value]
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        return ids[value[1:-1]]
    return value


async def _ask(stack: Stack, route: Route, world: World, authorization: str | None) -> httpx.Response:
    headers = {} if authorization is None else {"Authorization": authorization}
    body = None if route.body is None else _body(route.body, world.ids)
    async with httpx.AsyncClient(base_url=stack.url, timeout=10) as http:
        request = http.build_request(route.method, route.path.format(**world.ids), json=body, headers=headers)
        response = await http.send(request, stream=True)
        if response.status_code != 200 or not route.path.endswith("/stream"):
            await response.aread()
        await response.aclose()
        return response


def _check(answer: httpx.Response, status: int, code: str, world: World, what: str) -> None:
    assert answer.status_code == status, f"{what}: {answer.status_code} {answer.text[:300]}"
    assert answer.json()["error"]["code"] == code, what
    text = answer.text
    for secret in (MARKER, world.a.token, world.expired_token):
        assert secret not in text, f"{what}: leaks {secret[:16]}"


async def test_the_table_lists_every_route(api: Api) -> None:
    listed = {(r.method, r.path) for r in ROUTES} | PUBLIC
    served = set()
    for path, operations in (await api.key.get("/openapi.json")).json()["paths"].items():
        served |= {(method.upper(), path.replace("{call_id:path}", "{call_id}")) for method in operations}
    assert served == listed, (served - listed, listed - served)


@pytest.mark.parametrize("route", ROUTES, ids=[f"{r.method} {r.path}" for r in ROUTES])
async def test_every_credential_kind_gets_the_right_refusal(api: Api, route: Route) -> None:
    stack = api.stack
    world = await _world(api, stack)
    cases: list[tuple[str, str | None, int, str]] = [
        ("no credential", None, 401, "unauthorized"),
        ("not bearer", f"Basic {world.a.token}", 401, "unauthorized"),
        ("unknown API key", "Bearer swb_ak_" + "x" * 40, 401, "unauthorized"),
        ("unknown session token", "Bearer swb_st_" + world.a.id.replace("-", "") + "y" * 40, 401, "unauthorized"),
        ("revoked API key", f"Bearer {world.revoked_key}", 401, "unauthorized"),
        ("expired session token", f"Bearer {world.expired_token}", 401, "unauthorized"),
        ("API key lacking the permission", f"Bearer {world.keys_lacking[route.permission]}", 403, "forbidden"),
    ]
    if route.kind == "session":
        cases.append(("token of another session", f"Bearer {world.b.token}", 404, "not_found"))
    else:
        cases.append(("session token on a key-only route", f"Bearer {world.a.token}", 403, "forbidden"))
    for what, authorization, status, code in cases:
        _check(
            await _ask(stack, route, world, authorization), status, code, world, f"{route.method} {route.path}: {what}"
        )
