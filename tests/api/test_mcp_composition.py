"""The session MCP server where input requests, tasks and the listen stream meet: a caller that lacked a
capability its tool asked for hears -32021 when the call then fails; a tool declared `asks_first` asks a
caller that takes tasks in line and becomes its task once answered; a listen stream asking for tool-list
changes hears of each."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp.types as mt
import pytest
from mcp.shared.exceptions import MCPError

from tests.api.test_input_requests import ask, read
from tests.api.test_mcp_inputs import CALLED, NAME_FORM, SAMPLE, Person, acked, caller
from tests.api.test_mcp_tasks import CreatedTask, Tasks, listened, raw_body, settled, start
from tests.api.test_session_mcp import LOOKUP, text
from tests.api_client import Api

pytestmark = pytest.mark.both_redis

MISSING_CAPABILITY = -32021


async def test_a_call_failed_after_its_caller_lacked_a_capability_is_minus_32021_naming_it(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with caller(api, session) as client:
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "hi"}))
        call_id = await acked(api, session, web["id"])
        refused = await ask(api, session, web["id"], call_id, {"method": "sampling/createMessage", "params": SAMPLE})
        # The client is refused as before; the caller hears what it lacked once the client fails the call.
        assert refused.status_code == 409
        await api.call(session, web["id"], call_id, "result", text="cannot sample", is_error=True)
        with pytest.raises(MCPError) as lacked:
            await asyncio.wait_for(calling, 10)
        # A client that falls back and succeeds answers as usual.
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "again"}))
        call_id = await acked(api, session, web["id"], 2)
        assert (await ask(api, session, web["id"], call_id, {"method": "roots/list"})).status_code == 409
        await api.call(session, web["id"], call_id, "result", text="did without roots")
        fell_back = await asyncio.wait_for(calling, 10)
    assert lacked.value.code == MISSING_CAPABILITY
    assert lacked.value.data == {"requiredCapabilities": {"sampling": {}}}
    assert (fell_back.is_error, text(fell_back)) == (False, "did without roots")


async def test_a_task_failed_after_its_caller_lacked_a_capability_fails_with_minus_32021(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with caller(api, session, extensions=[Tasks()]) as client:
        created = await start(client)
        await api.call(session, web["id"], created.task_id, "ack")
        refused = await ask(api, session, web["id"], created.task_id, {"method": "roots/list"})
        assert refused.status_code == 409
        await api.call(session, web["id"], created.task_id, "result", text="no roots", is_error=True)
        done = await settled(client, created.task_id)
    assert done["status"] == "failed"
    assert done["error"]["code"] == MISSING_CAPABILITY
    assert done["error"]["data"] == {"requiredCapabilities": {"roots": {}}}


async def test_a_tool_that_asks_first_asks_in_line_and_its_answer_makes_the_task(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[{**LOOKUP, "asks_first": True}])
    # The callback declares form elicitation; the rounds are driven here, so it is never called.
    async with caller(api, session, extensions=[Tasks()], elicitation_callback=Person()) as client:
        calling = asyncio.create_task(
            client.session.call_tool(CALLED, {"word": "hi"}, allow_claimed=True, allow_input_required=True)
        )
        call_id = await acked(api, session, web["id"])
        asked = await ask(api, session, web["id"], call_id, {"message": "Who?", "schema": NAME_FORM, "key": "who"})
        assert asked.status_code == 201, asked.text
        first = await asyncio.wait_for(calling, 10)
        assert isinstance(first, mt.InputRequiredResult), first
        assert list(first.input_requests or {}) == ["who"]
        alice: dict[str, Any] = {"who": mt.ElicitResult(action="accept", content={"name": "Alice"})}
        created = await client.session.call_tool(
            CALLED, {"word": "hi"}, input_responses=alice, request_state=first.request_state, allow_claimed=True
        )
        # The retry that answered became the same call's task at once, the answer given.
        assert isinstance(created, CreatedTask), created
        assert created.task_id == call_id
        assert created.status == "working"
        assert (await read(api, session, asked.json()["request_id"])).json()["content"] == {"name": "Alice"}
        await api.call(session, web["id"], call_id, "result", text="hello Alice")
        done = await settled(client, call_id)
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "hello Alice"}]


async def test_a_bad_asks_first_is_400_naming_the_field(api: Api) -> None:
    session = await api.session()
    body = {"name": "web", "lifetime": {"type": "never"}, "tools": [{**LOOKUP, "asks_first": "yes"}]}
    async with api.as_session(session) as http:
        answer = await http.post(f"/v1/sessions/{session.id}/clients", json=body)
    assert answer.status_code == 400
    assert "asks_first" in answer.text


async def test_a_listen_stream_asking_tool_list_changes_hears_each(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    body = raw_body("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, tasks=False)
    frames: list[dict[str, Any]] = []

    async def heard(count: int) -> None:
        for _ in range(200):
            if len(frames) >= count:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"heard {frames}")

    following = asyncio.create_task(listened(api, session, body, frames))
    try:
        await heard(1)
        async with api.as_session(session) as http:
            tools = {"tools": [LOOKUP, {**LOOKUP, "name": "b"}]}
            changed = await http.put(f"/v1/sessions/{session.id}/clients/{web['id']}/tools", json=tools)
        assert changed.status_code == 200, changed.text
        await heard(2)
        await api.register(session, name="other", tools=[LOOKUP])
        await heard(3)
    finally:
        following.cancel()
    ack, *changes = frames
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"toolsListChanged": True, "taskIds": []}
    assert [f["method"] for f in changes] == ["notifications/tools/list_changed"] * 2
    assert all(f["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 9} for f in changes)
