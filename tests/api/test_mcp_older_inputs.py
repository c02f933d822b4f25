"""A grant whose server speaks an older protocol (the initialize handshake) and asks with
`elicitation/create` while it holds the `tools/call` open: each question becomes the session's input
request (`input_requested`, source `mcp`, the grant's name), the worker's call task waits for the answer
and hands it to the server as the ElicitResult, and the tool finishes with it. A question unanswered by
the end of the grant's time is cancelled; more than a call may hold open at once, or in all, is refused
with nothing stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from broker.services.inputs import MAX_OPEN_INPUTS
from switchboard.settings import Settings
from tests.api.test_mcp_grant_inputs import asked, extended, reply
from tests.api.test_mcp_grants import grant, texts
from tests.api_client import Api, of_type, run_over
from tests.mcp_older import OlderScript, serving_older
from workers.mcp.asking import MAX_ROUNDS

pytestmark = pytest.mark.both_redis


@pytest.fixture
def script() -> OlderScript:
    return OlderScript()


@pytest.fixture
async def older_url(script: OlderScript) -> AsyncIterator[str]:
    async with serving_older(script) as url:
        yield url


@pytest.fixture
def settings(settings: Settings, older_url: str) -> Settings:
    # Needs the server: it is stopped after the worker, whose connections to it would hold it up.
    return settings.model_copy(update={"provider_allow_private": True})


async def test_a_question_is_answered_through_the_session_and_the_tool_finishes_with_it(
    api: Api, older_url: str, script: OlderScript
) -> None:
    session = await api.session(mcp=[grant(older_url, "old")])
    await api.send(session, "/call mcp__old__asks")
    (request,) = await asked(api, session)
    assert request["source"] == "mcp"
    assert request["grant"] == "old"
    assert request["tool"] == "asks"
    assert request["message"] == "Your name?"
    assert request["schema"]["properties"] == {"name": {"type": "string"}}
    assert "url" not in request
    # The form is held to its schema as any input request's is.
    refused = await reply(api, session, request["request_id"], {"action": "accept", "content": {"name": 3}})
    assert refused.status_code == 400, refused.text
    answered = await reply(api, session, request["request_id"], {"action": "accept", "content": {"name": "Ada"}})
    assert answered.status_code == 200, answered.text
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is False, texts(result)
    assert texts(result) == ["accept {'name': 'Ada'}"]
    # Elicitation is declared to the older server (form and url), on the call's own connection.
    assert script.declared
    assert script.declared[-1]["elicitation"] == {"form": {}, "url": {}}
    # The connection the grant's calls share (which listed the tools) declares none: it cannot say whose
    # question one would be.
    assert script.listed
    assert all("elicitation" not in declared for declared in script.listed)


async def test_a_decline_goes_back_and_a_page_carries_its_link(api: Api, older_url: str) -> None:
    session = await api.session(mcp=[grant(older_url, "old")])
    await api.send(session, "/call mcp__old__visit")
    (request,) = await asked(api, session)
    assert request["url"] == "https://example.com/sign-in"
    assert "schema" not in request
    assert (await reply(api, session, request["request_id"], {"action": "decline"})).status_code == 200
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    assert texts(result) == ["decline"]


async def test_an_unanswered_question_is_cancelled_at_the_grants_timeout(api: Api, older_url: str) -> None:
    session = await api.session(mcp=[grant(older_url, "old", timeout_s=4)])
    await api.send(session, "/call mcp__old__asks")
    (request,) = await asked(api, session)
    events = await api.wait_for(session, run_over, timeout=20)
    (result,) = of_type(events, "tool_result")
    # The server heard `cancel` in time to answer the call with it.
    assert texts(result) == ["cancel"]
    # The question ended with its call: a late answer is refused.
    late = await reply(api, session, request["request_id"], {"action": "decline"})
    assert late.status_code == 409, late.text
    (provided,) = of_type(await extended(api, session), "input_provided")
    assert (provided["request_id"], provided["action"], provided["reason"]) == (
        request["request_id"],
        "cancel",
        "call_settled",
    )


async def test_questions_past_those_a_call_may_hold_open_are_refused_with_nothing_stored(
    api: Api, older_url: str, script: OlderScript
) -> None:
    script.questions = MAX_OPEN_INPUTS + 1
    session = await api.session(mcp=[grant(older_url, "old")])
    await api.send(session, "/call mcp__old__flood")
    requests = await asked(api, session, MAX_OPEN_INPUTS)
    await asyncio.sleep(0.5)
    assert len(of_type(await extended(api, session), "input_requested")) == MAX_OPEN_INPUTS
    for request in requests:
        assert (await reply(api, session, request["request_id"], {"action": "accept"})).status_code == 200
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    answers = texts(result)[0].split(" | ")
    assert answers.count("accept {}") == MAX_OPEN_INPUTS
    (refused,) = [a for a in answers if a.startswith("error")]
    assert f"at most {MAX_OPEN_INPUTS} questions open at once" in refused


async def test_questions_past_those_a_call_may_ask_are_refused_with_nothing_stored(
    api: Api, older_url: str, script: OlderScript
) -> None:
    script.rounds = MAX_ROUNDS + 1
    session = await api.session(mcp=[grant(older_url, "old")])
    await api.send(session, "/call mcp__old__many")
    for number in range(MAX_ROUNDS):
        request = (await asked(api, session, number + 1))[number]
        assert request["message"] == f"Round {number}?"
        assert (await reply(api, session, request["request_id"], {"action": "decline"})).status_code == 200
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    answers = texts(result)[0].split(" | ")
    assert answers[:MAX_ROUNDS] == ["decline"] * MAX_ROUNDS
    assert f"at most {MAX_ROUNDS} questions" in answers[MAX_ROUNDS]
    assert len(of_type(await extended(api, session), "input_requested")) == MAX_ROUNDS


async def test_a_form_no_host_can_draw_is_refused_with_nothing_stored(api: Api, older_url: str) -> None:
    session = await api.session(mcp=[grant(older_url, "old")])
    await api.send(session, "/call mcp__old__bad")
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    assert texts(result)[0].startswith("error ")
    assert "requestedSchema" in texts(result)[0]
    assert not of_type(await extended(api, session), "input_requested")


async def test_two_sessions_on_one_grant_each_get_only_their_own_question(api: Api, older_url: str) -> None:
    first = await api.session(mcp=[grant(older_url, "old")])
    second = await api.session(mcp=[grant(older_url, "old")])
    await asyncio.gather(api.send(first, "/call mcp__old__asks"), api.send(second, "/call mcp__old__asks"))
    (one,) = await asked(api, first)
    (two,) = await asked(api, second)
    calls = {
        session.id: of_type(await extended(api, session), "tool_call")[0]["call_id"] for session in (first, second)
    }
    assert one["call_id"] == calls[first.id]
    assert two["call_id"] == calls[second.id]
    assert (await reply(api, second, two["request_id"], {"action": "accept", "content": {"name": "Bo"}})).is_success
    assert (await reply(api, first, one["request_id"], {"action": "accept", "content": {"name": "Al"}})).is_success
    results = {}
    for session in (first, second):
        events = await api.wait_for(session, run_over, timeout=15)
        results[session.id] = texts(of_type(events, "tool_result")[0])
    assert results == {first.id: ["accept {'name': 'Al'}"], second.id: ["accept {'name': 'Bo'}"]}
    # Neither session saw the other's question.
    assert len(of_type(await extended(api, first), "input_requested")) == 1
    assert len(of_type(await extended(api, second), "input_requested")) == 1


async def test_sampling_and_roots_requests_are_still_refused(api: Api, older_url: str) -> None:
    session = await api.session(mcp=[grant(older_url, "old")])
    await api.send(session, "/call mcp__old__others")
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    sampled, rooted = texts(result)[0].split(" | ")
    assert sampled.startswith("error ")
    assert rooted.startswith("error ")
    assert not of_type(await extended(api, session), "input_requested")
