"""SWITCHBOARD_MAX_WAIT_S: a client tool's timeout_s and heartbeat_s, an MCP grant's timeout_s and a
policy's approval_timeout_s go up to the deployment's setting (not a constant); past it, and for every
malformed value, 400 naming the field, with nothing written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError

from broker.settings import BrokerSettings
from switchboard.settings import Settings
from tests.api_client import Api, Session, running_api
from tests.helpers import HIGHLIGHT, SCRIPTED_CONFIG

pytestmark = pytest.mark.both_redis

LIMIT = 1_000
TOOL = "client__web__highlight_row"
MALFORMED: list[Any] = [0, -5, "60", 1.5, True, None, [60], 31_536_001]


@pytest.fixture
async def api(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    async with running_api(settings, redis_url, api_key, {"max_wait_s": LIMIT}, worker=False) as api:
        yield api


def refused(answer: Any, *named: str) -> str:
    assert answer.status_code == 400, answer.text
    message: str = answer.json()["error"]["message"]
    for text in named:
        assert text in message, message
    return message


async def post_tools(api: Api, session: Session, tool: dict[str, Any]) -> Any:
    body = {"name": "web", "lifetime": {"type": "never"}, "tools": [tool]}
    async with api.as_session(session) as client:
        return await client.post(f"/v1/sessions/{session.id}/clients", json=body)


@pytest.mark.parametrize("field", ["timeout_s", "heartbeat_s"])
async def test_a_tool_deadline_goes_up_to_the_setting_and_no_further(api: Api, field: str) -> None:
    session = await api.session()
    past = await post_tools(api, session, HIGHLIGHT | {field: LIMIT + 1})
    refused(past, f"tools[0].{field}", "1,000 s", "SWITCHBOARD_MAX_WAIT_S")
    async with api.as_session(session) as client:
        assert (await client.get(f"/v1/sessions/{session.id}/clients")).json()["items"] == []
    at = await post_tools(api, session, HIGHLIGHT | {field: LIMIT})
    assert at.status_code == 201, at.text
    client_id = at.json()["id"]
    async with api.as_session(session) as client:
        put = f"/v1/sessions/{session.id}/clients/{client_id}/tools"
        refused(await client.put(put, json={"tools": [HIGHLIGHT | {field: LIMIT + 1}]}), f"tools[0].{field}")
        turn = {"type": "input", "text": "hi", "client_tools": [HIGHLIGHT, HIGHLIGHT | {"name": "b", field: LIMIT + 1}]}
        refused(await client.post(f"/v1/sessions/{session.id}/events", json=turn), f"client_tools[1].{field}")
    # Nothing of the refused ones was written: no run, the registration's tools as they were.
    events = await api.events(session)
    assert [e["type"] for e in events if e["type"] in ("run_queued", "client_tools_updated")] == []


@pytest.mark.parametrize("value", MALFORMED)
@pytest.mark.parametrize("field", ["timeout_s", "heartbeat_s"])
async def test_malformed_tool_deadlines_are_refused(api: Api, field: str, value: Any) -> None:
    session = await api.session()
    answer = await post_tools(api, session, HIGHLIGHT | {field: value})
    if value is None:
        # null is as good as absent.
        assert answer.status_code == 201
        return
    refused(answer, field)


async def publish(api: Api, **config: Any) -> Any:
    agent = (await api.key.post("/v1/agents", json={"name": "waits"})).json()
    version = {"model_provider_id": await api.scripted_provider_id(), **SCRIPTED_CONFIG, **config}
    return await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)


def grant(**changes: Any) -> dict[str, Any]:
    return {"name": "kit", "url": "https://mcp.example.com/mcp", "default_policy": "allow", **changes}


def timed(seconds: Any, policy: str = "require_approval") -> dict[str, Any]:
    return {"policy": policy, "approval_timeout_s": seconds}


# Each place a policy is given, as a version config with approval_timeout_s `seconds` (policy `policy`),
# and the field the refusal names.
PLACES: dict[str, tuple[Any, str]] = {
    "client": (lambda s, p: {"client_tool_policies": {TOOL: timed(s, p)}}, "client_tool_policies"),
    "server": (lambda s, p: {"server_tool_policies": {"calc*": timed(s, p)}}, "server_tool_policies"),
    "grant_default": (lambda s, p: {"mcp": [grant(default_policy=timed(s, p))]}, "default_policy"),
    "grant_tool": (
        lambda s, p: {"mcp": [grant(tools=[{"name": "add", "policy": p, "approval_timeout_s": s}])]},
        "mcp[0].tools[0]",
    ),
}


@pytest.mark.parametrize("place", list(PLACES))
async def test_an_approval_timeout_goes_up_to_the_setting(api: Api, place: str) -> None:
    make, named = PLACES[place]
    refused(await publish(api, **make(LIMIT + 1, "require_approval")), named, "approval_timeout_s", "1,000 s")
    if place.startswith("grant"):
        # An MCP grant needs its server's address checked: the limit comes first, and a good one is held
        # by the unit tests of its reading (tests/unit/test_wait_rules.py).
        return
    published = await publish(api, **make(LIMIT, "require_approval"))
    assert published.status_code == 201, published.text
    config = published.json()["config"]
    assert "approval_timeout_s" in str(config)


@pytest.mark.parametrize("value", [0, -5, "60", 1.5, True, [60], 31_536_001])
@pytest.mark.parametrize("place", list(PLACES))
async def test_malformed_approval_timeouts_are_refused(api: Api, place: str, value: Any) -> None:
    make, _ = PLACES[place]
    refused(await publish(api, **make(value, "require_approval")), "approval_timeout_s")


@pytest.mark.parametrize("policy", ["allow", "deny"])
@pytest.mark.parametrize("place", list(PLACES))
async def test_an_approval_timeout_only_comes_with_require_approval(api: Api, place: str, policy: str) -> None:
    make, _ = PLACES[place]
    message = refused(await publish(api, **make(60, policy)), "approval_timeout_s")
    assert "require_approval" in message


async def test_a_grant_call_timeout_goes_up_to_the_setting(api: Api) -> None:
    refused(await publish(api, mcp=[grant(timeout_s=LIMIT + 1)]), "mcp[0].timeout_s", "SWITCHBOARD_MAX_WAIT_S")


async def test_an_unknown_key_in_a_policy_object_is_refused(api: Api) -> None:
    bad = {"client_tool_policies": {TOOL: {"policy": "require_approval", "approval_timeout_s": 5, "x": 1}}}
    refused(await publish(api, **bad), "client_tool_policies")
    refused(await publish(api, client_tool_policies={TOOL: {"approval_timeout_s": 5}}), "client_tool_policies")


def test_the_setting_is_at_most_a_year() -> None:
    assert BrokerSettings().max_wait_s == 2_592_000
    assert BrokerSettings(max_wait_s=31_536_000).max_wait_s == 31_536_000
    for bad in (0, 31_536_001):
        with pytest.raises(ValidationError):
            BrokerSettings(max_wait_s=bad)
