"""The browser SDK's `call.ask` and `call.askUrl` (api/static/switchboard.js), run in Node by
tests/js/sdk_ask_driver.mjs against a served stack: the tool's ask resolves with the answer posted to the
input request, accepted or declined, on a connection that streams extensions and on one that does not (the
request is then read back); a refused ask and a cancelled call reject it; the SDK's own result deadline
waits meanwhile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchboard.settings import Settings
from tests.api_client import Api, Event, Session, of_type, running_api, whole_log
from tests.js_clients import drive

FORM = {
    "type": "object",
    "properties": {"amount": {"type": "number", "maximum": 100}, "confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


@pytest.fixture
async def roomy(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    """Deadlines that leave Node the time to start and ack."""
    update: dict[str, object] = {"ack_timeout_s": 10.0, "result_timeout_s": 10.0}
    async with running_api(settings, redis_url, api_key, update) as api:
        yield api


async def extended(api: Api, session: Session) -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    return await whole_log(lambda params: api.key.get(path, params={**params, "include": "extensions"}))


async def until(api: Api, session: Session, kind: str, count: int) -> list[Event]:
    for _ in range(1000):
        found = of_type(await extended(api, session), kind)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {count} {kind} events")


async def answer(api: Api, session: Session, request_id: str, body: dict[str, Any]) -> None:
    async with api.as_session(session) as client:
        answered = await client.post(f"/v1/sessions/{session.id}/input-requests/{request_id}", json=body)
    assert answered.status_code == 200, answered.text


async def person(api: Api, session: Session, calls: list[tuple[str, dict[str, Any]]]) -> list[Event]:
    """Makes each call once the client is there and answers the request it asks with its answer."""
    await until(api, session, "client_registered", 1)
    for count, (arguments, body) in enumerate(calls, start=1):
        await api.send(session, f"/call client__web__confirm {arguments}")
        request = (await until(api, session, "input_requested", count))[-1]
        await answer(api, session, request["request_id"], body)
    return await until(api, session, "input_provided", len(calls))


async def test_ask_resolves_with_the_accepted_form_on_a_connection_streaming_extensions(roomy: Api) -> None:
    session = await roomy.session()
    plan = {"url": roomy.stack.url, "sessionId": session.id, "token": session.token, "include": "extensions"}
    content = {"amount": 42, "confirm": True}
    driving = asyncio.create_task(drive("sdk_ask_driver.mjs", {**plan, "calls": 1, "form": FORM}))
    await person(roomy, session, [("{}", {"action": "accept", "content": content})])
    lines = await driving
    [requested] = of_type(await extended(roomy, session), "input_requested")
    assert (requested["message"], requested["schema"]) == ("Confirm the amount", FORM)
    accepted = {"action": "accept", "content": content}
    assert lines == [{"callId": requested["call_id"], "answer": accepted}, {"left": True}]
    [result] = of_type(await extended(roomy, session), "tool_result")
    assert json.loads(result["content"][0]["data"]["text"]) == accepted


async def test_ask_resolves_with_a_decline_and_ask_url_with_an_accept_read_back_without_extensions(
    roomy: Api,
) -> None:
    session = await roomy.session()
    plan = {"url": roomy.stack.url, "sessionId": session.id, "token": session.token, "include": ""}
    driving = asyncio.create_task(drive("sdk_ask_driver.mjs", {**plan, "calls": 2, "form": FORM}))
    page = json.dumps({"url": "https://example.com/sign-in"})
    await person(roomy, session, [("{}", {"action": "decline"}), (page, {"action": "accept"})])
    lines = await driving
    form, visit = of_type(await extended(roomy, session), "input_requested")
    assert (visit["key"], visit["url"], visit["message"]) == ("sign-in", "https://example.com/sign-in", "Sign in first")
    assert lines == [
        {"callId": form["call_id"], "answer": {"action": "decline", "content": None}},
        {"callId": visit["call_id"], "answer": {"action": "accept", "content": None}},
        {"left": True},
    ]


async def test_a_refused_ask_rejects_with_the_servers_error_and_a_cancelled_call_ends_the_wait(roomy: Api) -> None:
    session = await roomy.session()
    plan = {"url": roomy.stack.url, "sessionId": session.id, "token": session.token, "include": "extensions"}
    driving = asyncio.create_task(drive("sdk_ask_driver.mjs", {**plan, "calls": 2, "form": FORM}))
    await until(roomy, session, "client_registered", 1)
    nested = {"type": "object", "properties": {"nested": {"type": "object"}}}
    await roomy.send(session, f"/call client__web__confirm {json.dumps({'form': nested})}")
    await roomy.wait_for(session, lambda events: bool(of_type(events, "tool_result")), timeout=15)
    await roomy.send(session, "/call client__web__confirm")
    [request] = await until(roomy, session, "input_requested", 1)
    async with roomy.as_session(session) as client:
        cancelled = await client.post(f"/v1/sessions/{session.id}/calls/{request['call_id']}/cancel", json={})
    assert cancelled.status_code == 200, cancelled.text
    refused, ended, left = await driving
    assert refused["status"] == 400
    assert "schema.properties.nested" in refused["error"]
    assert ended == {"callId": request["call_id"], "error": "the call failed: run_gone (cancelled)", "status": None}
    assert left == {"left": True}
    # The request ended with its call.
    [provided] = of_type(await extended(roomy, session), "input_provided")
    assert (provided["action"], provided["reason"]) == ("cancel", "call_settled")


async def test_the_sdks_own_result_deadline_waits_while_the_person_is_asked() -> None:
    [seen] = await drive("deadline_driver.mjs", {"ms": 300, "pausedMs": 600})
    assert not seen["expiredWhilePaused"]
    # What was left of it (all of it: paused at once) runs after the resume; timers fire late, never early.
    assert seen["msAfterResume"] >= 290
