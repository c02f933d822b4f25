"""Worker pools: members of one registration share its calls, each call handed to exactly one member."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from switchboard.settings import Settings
from tests.api_client import Api, Session, of_type, run_over, running_api
from tests.sse import Frames

pytestmark = pytest.mark.both_redis

MEMBER = "Switchboard-Pool-Member"
X = {"name": "x", "description": "A pooled tool", "parameters": {"type": "object"}}


@pytest.fixture
async def pooled(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    """A stack whose deadlines leave room for a claim interval of 0.3 s to pass several times."""
    update: dict[str, object] = {"ack_timeout_s": 10.0, "result_timeout_s": 10.0, "pool_claim_s": 0.3}
    async with running_api(settings, redis_url, api_key, update) as api:
        yield api


@dataclass
class Member:
    name: str
    frames: Frames
    http: httpx.AsyncClient
    path: str
    taken: list[str] = field(default_factory=list)
    owned: list[str] = field(default_factory=list)

    async def next_call(self, timeout: float = 5) -> dict[str, Any]:
        event = await self.frames.event(timeout)
        assert event["type"] == "client_tool_dispatched"
        self.taken.append(event["call_id"])
        return event

    async def ack(self, call_id: str, member: str | None = None) -> httpx.Response:
        return await self.http.post(f"{self.path}/calls/{call_id}/ack", headers={MEMBER: member or self.name})

    async def answer(self, call_id: str) -> None:
        acked = await self.ack(call_id)
        assert acked.status_code == 200, acked.text
        done = await self.http.post(f"{self.path}/calls/{call_id}/result", json={"text": f"done by {self.name}"})
        assert done.status_code == 204, done.text


@contextlib.asynccontextmanager
async def member(api: Api, session: Session, client_id: str, prefetch: int | None = None) -> AsyncIterator[Member]:
    path = f"/v1/sessions/{session.id}/clients/{client_id}"
    params = {} if prefetch is None else {"prefetch": str(prefetch)}
    async with api.as_session(session) as http, http.stream("GET", f"{path}/calls/stream", params=params) as stream:
        assert stream.status_code == 200, await stream.aread()
        yield Member(stream.headers[MEMBER], Frames(stream), http, path)


def completed(runs: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda events: len(of_type(events, "run_completed")) == runs


async def serve(member: Member) -> None:
    """Answer every call handed over, until cancelled. A call that waited past the claim interval in
    this member's queue may have been handed to another member meanwhile: its ack says so (409), and it
    is not this member's to run; on a loaded machine the other member may even have answered it first,
    and the ack says that instead."""
    while True:
        call_id = (await member.next_call(timeout=30))["call_id"]
        acked = await member.ack(call_id)
        if acked.status_code == 409:
            taken = (f"call {call_id} was handed to another pool member", f"call {call_id} already has a result")
            assert acked.json()["error"]["message"] in taken
            continue
        assert acked.status_code == 200, acked.text
        member.owned.append(call_id)
        done = await member.http.post(f"{member.path}/calls/{call_id}/result", json={"text": f"by {member.name}"})
        assert done.status_code == 204, done.text


async def test_every_call_goes_to_exactly_one_member_and_is_answered_once(pooled: Api) -> None:
    session = await pooled.session()
    pool = await pooled.register(session, "pool", tools=[X])
    async with (
        member(pooled, session, pool["id"]) as a,
        member(pooled, session, pool["id"]) as b,
        member(pooled, session, pool["id"]) as c,
    ):
        assert len({a.name, b.name, c.name}) == 3
        serving = [asyncio.create_task(serve(m)) for m in (a, b, c)]
        try:
            for runs in range(1, 4):
                await pooled.send(session, "\n".join(["/call client__pool__x"] * 12))
                await pooled.wait_for(session, completed(runs), timeout=15)
        finally:
            for task in serving:
                task.cancel()
            ended = await asyncio.gather(*serving, return_exceptions=True)
        # A member that failed would have left its calls to the others silently: none may have.
        assert all(isinstance(outcome, asyncio.CancelledError) for outcome in ended), ended
    events = await pooled.events(session)
    dispatched = [e["call_id"] for e in of_type(events, "client_tool_dispatched")]
    results = [e["call_id"] for e in of_type(events, "tool_result")]
    assert len(dispatched) == 36
    assert sorted(a.owned + b.owned + c.owned) == sorted(dispatched)  # each owned by one member, once
    assert sorted(results) == sorted(dispatched)  # each answered once
    assert not of_type(events, "client_tool_failed")


async def test_a_call_taken_by_a_member_that_dies_goes_to_another(pooled: Api) -> None:
    session = await pooled.session()
    pool = await pooled.register(session, "pool", tools=[X])
    async with contextlib.AsyncExitStack() as doomed_lives:
        doomed = await doomed_lives.enter_async_context(member(pooled, session, pool["id"]))
        await pooled.send(session, "/call client__pool__x")
        call_id = (await doomed.next_call())["call_id"]
        async with member(pooled, session, pool["id"]) as survivor:
            # The doomed member goes away holding the call, unacked.
            await doomed_lives.aclose()
            reclaimed = await survivor.next_call(timeout=3)
            assert reclaimed["call_id"] == call_id
            async with pooled.as_session(session) as http:
                late = await http.post(f"{doomed.path}/calls/{call_id}/ack", headers={MEMBER: doomed.name})
            assert late.status_code == 409
            assert late.json()["error"]["message"] == f"call {call_id} was handed to another pool member"
            await survivor.answer(call_id)
    events = await pooled.wait_for(session, run_over)
    assert [e["call_id"] for e in of_type(events, "tool_result")] == [call_id]
    assert of_type(events, "run_completed")


async def test_calls_dispatched_before_any_member_came_are_handed_to_the_first(pooled: Api) -> None:
    session = await pooled.session()
    pool = await pooled.register(session, "pool", tools=[X])
    await pooled.send(session, "/call client__pool__x\n/call client__pool__x")
    await pooled.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 2)
    async with member(pooled, session, pool["id"]) as first:
        calls = [await first.next_call(), await first.next_call()]
        for call in calls:
            await first.answer(call["call_id"])
    events = await pooled.wait_for(session, run_over)
    assert len(of_type(events, "tool_result")) == 2


async def test_a_member_stream_ends_when_its_registration_leaves(pooled: Api) -> None:
    session = await pooled.session()
    pool = await pooled.register(session, "pool", tools=[X])
    async with member(pooled, session, pool["id"]) as only:
        async with pooled.as_session(session) as http:
            assert (await http.delete(f"/v1/sessions/{session.id}/clients/{pool['id']}")).status_code == 204
        with pytest.raises(EOFError):
            await only.frames.event(timeout=3)


async def test_no_member_stream_for_a_registration_that_is_not_there(pooled: Api) -> None:
    session = await pooled.session()
    path = f"/v1/sessions/{session.id}/clients/0190aaaa-bbbb-7ccc-8ddd-eeeeffff0000/calls/stream"
    async with pooled.as_session(session) as http:
        answer = await http.get(path)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"


async def test_a_malformed_member_header_is_refused(pooled: Api) -> None:
    session = await pooled.session()
    pool = await pooled.register(session, "pool", tools=[X])
    await pooled.send(session, "/call client__pool__x")
    (call,) = of_type(
        await pooled.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched"))), "client_tool_dispatched"
    )
    path = f"/v1/sessions/{session.id}/clients/{pool['id']}/calls/{call['call_id']}/ack"
    async with pooled.as_session(session) as http:
        answer = await http.post(path, headers={MEMBER: "not a member!"})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith(f"{MEMBER}: must be the member name")


async def test_a_member_is_handed_no_more_unacked_calls_than_its_prefetch(pooled: Api) -> None:
    session = await pooled.session()
    pool = await pooled.register(session, "pool", tools=[X])
    await pooled.send(session, "\n".join(["/call client__pool__x"] * 3))
    await pooled.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 3)
    async with member(pooled, session, pool["id"], prefetch=1) as one:
        first = await one.next_call()
        waiting = asyncio.create_task(one.next_call())
        await asyncio.sleep(0.5)
        assert not waiting.done()  # holding one unacked: no room
        await one.answer(first["call_id"])
        second = await waiting
        await one.answer(second["call_id"])
        third = await one.next_call()
        await one.answer(third["call_id"])
    assert len({first["call_id"], second["call_id"], third["call_id"]}) == 3
    assert len(of_type(await pooled.wait_for(session, run_over), "tool_result")) == 3


async def test_a_prefetch_out_of_range_is_refused(pooled: Api) -> None:
    session = await pooled.session()
    pool = await pooled.register(session, "pool", tools=[X])
    async with pooled.as_session(session) as http:
        answer = await http.get(f"/v1/sessions/{session.id}/clients/{pool['id']}/calls/stream?prefetch=0")
    assert answer.status_code == 400
    assert "prefetch" in answer.json()["error"]["message"]
