"""A grant whose server asks for input during a call (an InputRequiredResult): each question becomes an
input request of the session (`input_requested` with source `mcp` and the grant's name), answered at the
session's route; the call is parked meanwhile, and retried with the answers as `inputResponses` and the
server's `requestState`. A page (URL mode) carries its link; a server asking more than a call may hold
open fails the call saying so, with nothing asked of the person."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchboard.settings import Settings
from tests.api.test_mcp_grants import grant, texts
from tests.api_client import Api, Event, Session, of_type, run_over, whole_log
from tests.mcp_servers import TaskScript, tasks_app
from tests.stack import serve_asgi

pytestmark = pytest.mark.both_redis


@pytest.fixture
def script() -> TaskScript:
    return TaskScript()


@pytest.fixture
async def tasks_url(script: TaskScript) -> AsyncIterator[str]:
    async with serve_asgi(tasks_app(script)) as url:
        yield f"{url}/mcp"


@pytest.fixture
def settings(settings: Settings, tasks_url: str) -> Settings:
    return settings.model_copy(update={"provider_allow_private": True})


async def extended(api: Api, session: Session) -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    return await whole_log(lambda params: api.key.get(path, params={**params, "include": "extensions"}))


async def asked(api: Api, session: Session, count: int = 1) -> list[Event]:
    """The `input_requested` events once `count` are logged."""
    loop = asyncio.get_running_loop()
    until = loop.time() + 15
    while loop.time() < until:
        found = of_type(await extended(api, session), "input_requested")
        if len(found) >= count:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("no input_requested")


async def until_listed(api: Api, session_id: str) -> list[dict[str, Any]]:
    """The session's inbox items once there are any (the worker files them from the events' notices)."""
    for _ in range(200):
        answer = await api.key.get("/v1/inbox", params={"kind": "input"})
        assert answer.status_code == 200, answer.text
        items = [i for i in answer.json()["items"] if i["session_id"] == session_id]
        if items:
            return items
        await asyncio.sleep(0.05)
    raise AssertionError("no inbox item")


async def reply(api: Api, session: Session, request_id: str, body: dict[str, Any]) -> Any:
    async with api.as_session(session) as client:
        return await client.post(f"/v1/sessions/{session.id}/input-requests/{request_id}", json=body)


async def test_a_question_is_answered_through_the_session_and_the_call_retried_with_it(
    api: Api, tasks_url: str, script: TaskScript
) -> None:
    session = await api.session(mcp=[grant(tasks_url, "work")])
    await api.send(session, "/call mcp__work__asks")
    (request,) = await asked(api, session)
    assert request["source"] == "mcp"
    assert request["grant"] == "work"
    assert request["tool"] == "asks"
    assert request["key"] == "colour"
    assert request["message"] == "Which colour?"
    assert request["schema"]["properties"] == {"colour": {"type": "string"}}
    assert "url" not in request
    # It opens an item of the workspace's inbox, as a client's request does.
    items = await until_listed(api, session.id)
    assert [(i["kind"], i["request_id"], i["tool"]) for i in items] == [("input", request["request_id"], "asks")]
    # The form is held to its schema as any input request's is.
    refused = await reply(api, session, request["request_id"], {"action": "accept", "content": {"colour": 3}})
    assert refused.status_code == 400, refused.text
    assert "content.colour" in refused.json()["error"]["message"]
    assert script.retries == []
    answered = await reply(api, session, request["request_id"], {"action": "accept", "content": {"colour": "teal"}})
    assert answered.status_code == 200, answered.text
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is False, texts(result)
    assert script.retries == [({"colour": {"action": "accept", "content": {"colour": "teal"}}}, "round-1")]
    assert texts(result)[0].startswith("answered")
    (provided,) = of_type(await extended(api, session), "input_provided")
    assert provided["request_id"] == request["request_id"]
    assert provided["action"] == "accept"


async def test_a_page_to_visit_carries_its_link_and_a_decline_goes_back(
    api: Api, tasks_url: str, script: TaskScript
) -> None:
    session = await api.session(mcp=[grant(tasks_url, "work")])
    await api.send(session, "/call mcp__work__visit")
    (request,) = await asked(api, session)
    assert request["url"] == "https://example.com/sign-in"
    assert request["key"] == "sign-in"
    assert "schema" not in request
    assert (await reply(api, session, request["request_id"], {"action": "decline"})).status_code == 200
    events = await api.wait_for(session, run_over, timeout=15)
    assert of_type(events, "tool_result")
    assert script.retries == [({"sign-in": {"action": "decline"}}, "round-1")]


async def test_a_flood_of_questions_fails_the_call_asking_nothing(api: Api, tasks_url: str, script: TaskScript) -> None:
    script.questions = 5
    session = await api.session(mcp=[grant(tasks_url, "work")])
    await api.send(session, "/call mcp__work__flood")
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is True
    assert "asked 5 questions at once, past the 4 a call may hold open" in texts(result)[0]
    assert not of_type(await extended(api, session), "input_requested")
    assert script.retries == []


async def test_four_questions_are_asked_and_the_call_waits_for_every_answer(
    api: Api, tasks_url: str, script: TaskScript
) -> None:
    script.questions = 4
    session = await api.session(mcp=[grant(tasks_url, "work")])
    await api.send(session, "/call mcp__work__flood")
    requests = await asked(api, session, 4)
    assert sorted(r["key"] for r in requests) == ["q0", "q1", "q2", "q3"]
    for request in requests[:3]:
        assert (await reply(api, session, request["request_id"], {"action": "accept"})).status_code == 200
    assert script.retries == []
    assert (await reply(api, session, requests[3]["request_id"], {"action": "cancel"})).status_code == 200
    events = await api.wait_for(session, run_over, timeout=15)
    assert of_type(events, "tool_result")
    ((answers, state),) = script.retries
    assert answers == {
        "q0": {"action": "accept", "content": {}},
        "q1": {"action": "accept", "content": {}},
        "q2": {"action": "accept", "content": {}},
        "q3": {"action": "cancel"},
    }
    assert state == "round-1"


async def test_an_unanswered_question_ends_at_the_grants_timeout(api: Api, tasks_url: str) -> None:
    session = await api.session(mcp=[grant(tasks_url, "work", timeout_s=2)])
    await api.send(session, "/call mcp__work__asks")
    (request,) = await asked(api, session)
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is True
    assert "did not finish within 2 s" in texts(result)[0]
    # The question ended with its call: a late answer is refused.
    late = await reply(api, session, request["request_id"], {"action": "decline"})
    assert late.status_code == 409
