"""A called tool that asks, relayed to the MCP caller: a 2026-07-28 caller gets an `InputRequiredResult`
and answers with its retry's `inputResponses` (the retry bound to the call by a sealed `requestState`);
sampling and roots go only to a caller that declared them (older callers:
tests/api/test_mcp_inputs_processes.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.api.test_input_requests import FORM, answer, ask, read
from tests.api.test_mcp_tasks import Tasks, settled, start, task_method
from tests.api.test_session_mcp import LOOKUP, dispatched, text
from tests.api_client import Api, Session

pytestmark = pytest.mark.both_redis

CALLED = "client__web__lookup"
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 20}


@contextlib.asynccontextmanager
async def caller(api: Api, session: Session, mode: str = "auto", **callbacks: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {session.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"{api.stack.url}/v1/sessions/{session.id}/mcp", http_client=http)
        async with Client(transport, cache=None, mode=mode, **callbacks) as client:
            yield client


async def acked(api: Api, session: Session, client_id: str, count: int = 1) -> str:
    event = (await dispatched(api, session, count))[-1]
    assert (await api.call(session, client_id, event["call_id"], "ack")).status_code == 200
    return str(event["call_id"])


async def until_answered(api: Api, session: Session, request_id: str) -> dict[str, Any]:
    for _ in range(200):
        found: dict[str, Any] = (await read(api, session, request_id)).json()
        if found["state"] != "open":
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"request {request_id} was never answered")


class Person:
    """An MCP caller's elicitation callback: answers forms from `answers`, in order, and notes what it saw."""

    def __init__(self, *answers: mt.ElicitResult) -> None:
        self.answers = list(answers)
        self.seen: list[mt.ElicitRequestParams] = []

    async def __call__(self, context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        self.seen.append(params)
        return self.answers.pop(0)


class Roots:
    """An MCP caller's roots callback."""

    listed: ClassVar[dict[str, Any]] = {"roots": [{"uri": "file:///work", "name": "work"}]}

    async def __call__(self, context: ClientRequestContext) -> mt.ListRootsResult:
        return mt.ListRootsResult.model_validate(self.listed)


async def test_a_tool_that_asks_twice_is_answered_by_the_callers_retries(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    person = Person(
        mt.ElicitResult(action="accept", content={"amount": 12.5, "confirm": True}),
        mt.ElicitResult(action="accept", content={"name": "Alice"}),
    )
    async with caller(api, session, elicitation_callback=person) as client:
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "pay"}))
        call_id = await acked(api, session, web["id"])
        first = await ask(api, session, web["id"], call_id, {"message": "How much?", "schema": FORM, "key": "amount"})
        assert first.status_code == 201, first.text
        answered = await until_answered(api, session, first.json()["request_id"])
        assert (answered["action"], answered["content"]) == ("accept", {"amount": 12.5, "confirm": True})
        second = await ask(api, session, web["id"], call_id, {"message": "Who?", "schema": NAME_FORM})
        assert (await until_answered(api, session, second.json()["request_id"]))["content"] == {"name": "Alice"}
        assert (await api.call(session, web["id"], call_id, "result", text="paid Alice 12.5")).status_code == 204
        result = await asyncio.wait_for(calling, 10)
    assert (result.is_error, text(result)) == (False, "paid Alice 12.5")
    assert [p.message for p in person.seen] == ["How much?", "Who?"]
    assert isinstance(person.seen[0], mt.ElicitRequestFormParams)
    assert person.seen[0].requested_schema == FORM
    # One call all along: the retries went on waiting for it rather than making new ones.
    assert len(await dispatched(api, session)) == 1


async def test_url_mode_goes_to_a_caller_that_declared_it(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    person = Person(mt.ElicitResult(action="accept"))
    async with caller(api, session, elicitation_callback=person) as client:
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "login"}))
        call_id = await acked(api, session, web["id"])
        page = {"message": "Sign in to the bank", "url": "https://bank.example/sign-in"}
        asked = await ask(api, session, web["id"], call_id, page)
        request_id = asked.json()["request_id"]
        answered = await until_answered(api, session, request_id)
        await api.call(session, web["id"], call_id, "result", text="signed in")
        await asyncio.wait_for(calling, 10)
    assert (answered["action"], answered["content"]) == ("accept", None)
    (seen,) = person.seen
    assert isinstance(seen, mt.ElicitRequestURLParams)
    # 2026-07-28 dropped the elicitation's id: the request is named by its key.
    assert (seen.message, seen.url, seen.elicitation_id) == (page["message"], page["url"], None)


async def test_a_declined_request_becomes_the_tools_error(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with caller(api, session, elicitation_callback=Person(mt.ElicitResult(action="decline"))) as client:
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "pay"}))
        call_id = await acked(api, session, web["id"])
        asked = await ask(api, session, web["id"], call_id, {"message": "Pay?", "schema": NAME_FORM})
        answered = await until_answered(api, session, asked.json()["request_id"])
        # The client reads the answer (input_provided) and makes the decline its error.
        assert answered["action"] == "decline"
        failed = await api.call(session, web["id"], call_id, "result", text="the person declined", is_error=True)
        assert failed.status_code == 204, failed.text
        result = await asyncio.wait_for(calling, 10)
    assert (result.is_error, text(result)) == (True, "the person declined")


async def first_round(api: Api, session: Session, client: Client, web: dict[str, Any]) -> tuple[str, str, Any]:
    """A call whose client asks for a name, as its caller first hears of it: the call, request and result."""
    round_one = asyncio.create_task(client.session.call_tool(CALLED, {"word": "w"}, allow_input_required=True))
    call_id = await acked(api, session, web["id"])
    asked = await ask(api, session, web["id"], call_id, {"message": "Name?", "schema": NAME_FORM, "key": "user"})
    required = await asyncio.wait_for(round_one, 10)
    assert isinstance(required, mt.InputRequiredResult)
    return call_id, asked.json()["request_id"], required


async def test_a_tampered_foreign_or_replayed_state_is_refused_and_writes_nothing(api: Api) -> None:
    session, other = await api.session(), await api.session()
    web = await api.register(session, tools=[LOOKUP])
    await api.register(other, tools=[LOOKUP])
    alice: mt.InputResponses = {"user": mt.ElicitResult(action="accept", content={"name": "Alice"})}
    async with caller(api, session, elicitation_callback=Person()) as client:
        call_id, request_id, required = await first_round(api, session, client, web)
        assert required.input_requests is not None
        user = required.input_requests["user"]
        assert isinstance(user, mt.ElicitRequest)
        assert user.params.message == "Name?"
        state = required.request_state
        assert state is not None

        async def retry(
            state: str, arguments: dict[str, Any] | None = None, responses: Any = alice, name: str = CALLED
        ) -> Any:
            return await client.session.call_tool(
                name,
                arguments or {"word": "w"},
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )

        for bad in (state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB"), "v1.nonsense", state + "x"):
            with pytest.raises(MCPError) as tampered:
                await retry(bad)
            assert tampered.value.error.code == mt.INVALID_PARAMS
        with pytest.raises(MCPError):
            await retry(state, {"word": "other"})
        bad_content = {"user": mt.ElicitResult(action="accept", content={"name": 7})}
        with pytest.raises(MCPError) as unchecked:
            await retry(state, responses=bad_content)
        assert "inputResponses.user.content.name" in unchecked.value.error.message
        assert (await read(api, session, request_id)).json()["state"] == "open"
        async with caller(api, other) as stranger:
            with pytest.raises(MCPError):
                await stranger.session.call_tool(
                    CALLED, {"word": "w"}, input_responses=alice, request_state=state, allow_input_required=True
                )
        assert (await read(api, session, request_id)).json()["state"] == "open"

        finishing = asyncio.create_task(retry(state))
        answered = await until_answered(api, session, request_id)
        assert answered["content"] == {"name": "Alice"}
        await api.call(session, web["id"], call_id, "result", text="hello Alice")
        done = await asyncio.wait_for(finishing, 10)
        assert isinstance(done, mt.CallToolResult)
        assert text(done) == "hello Alice"
        with pytest.raises(MCPError) as replayed:
            await retry(state, responses={"user": mt.ElicitResult(action="accept", content={"name": "Mallory"})})
        assert replayed.value.error.code == mt.INVALID_PARAMS
    assert (await read(api, session, request_id)).json()["content"] == {"name": "Alice"}


async def test_responses_sent_without_a_state_answer_what_the_call_asks_by_key(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    responses: mt.InputResponses = {
        "user": mt.ElicitResult(action="accept", content={"name": "Bob"}),
        "unknown_extra_key": mt.ElicitResult(action="accept", content={"foo": "bar"}),
    }
    async with caller(api, session) as client:
        calling = asyncio.create_task(
            client.session.call_tool(CALLED, {"word": "w"}, input_responses=responses, allow_input_required=True)
        )
        call_id = await acked(api, session, web["id"])
        asked = await ask(api, session, web["id"], call_id, {"message": "Name?", "schema": NAME_FORM, "key": "user"})
        assert (await until_answered(api, session, asked.json()["request_id"]))["content"] == {"name": "Bob"}
        await api.call(session, web["id"], call_id, "result", text="hello Bob")
        result = await asyncio.wait_for(calling, 10)
    assert isinstance(result, mt.CallToolResult)
    assert text(result) == "hello Bob"


async def test_sampling_and_roots_go_to_a_caller_that_declared_them(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    sampled: list[mt.CreateMessageRequestParams] = []

    async def sample(_context: Any, params: mt.CreateMessageRequestParams) -> mt.CreateMessageResult:
        sampled.append(params)
        reply = mt.TextContent(type="text", text="Hi there")
        return mt.CreateMessageResult(role="assistant", content=reply, model="m-1", stop_reason="endTurn")

    async with caller(api, session, sampling_callback=sample, list_roots_callback=Roots()) as client:
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "hi"}))
        call_id = await acked(api, session, web["id"])
        asked = await ask(api, session, web["id"], call_id, {"method": "sampling/createMessage", "params": SAMPLE})
        assert asked.status_code == 201, asked.text
        sampled_answer = await until_answered(api, session, asked.json()["request_id"])
        listed = await ask(api, session, web["id"], call_id, {"method": "roots/list", "key": "where"})
        assert listed.status_code == 201, listed.text
        roots_answer = await until_answered(api, session, listed.json()["request_id"])
        # A form goes to a caller that declared no elicitation only through the session's other answerers.
        form = await ask(api, session, web["id"], call_id, {"message": "Name?", "schema": NAME_FORM})
        await asyncio.sleep(0.5)
        assert (await read(api, session, form.json()["request_id"])).json()["state"] == "open"
        await answer(api, session, form.json()["request_id"], {"action": "accept", "content": {"name": "Eve"}})
        await api.call(session, web["id"], call_id, "result", text="done")
        await asyncio.wait_for(calling, 10)
    assert sampled_answer["action"] == "accept"
    assert sampled_answer["content"]["content"] == {"type": "text", "text": "Hi there"}
    assert sampled_answer["content"]["model"] == "m-1"
    assert sampled[0].max_tokens == 20
    assert roots_answer["content"] == Roots.listed


async def test_sampling_is_refused_at_once_where_no_caller_declared_it(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with caller(api, session) as client:
        calling = asyncio.create_task(client.call_tool(CALLED, {"word": "hi"}))
        call_id = await acked(api, session, web["id"])
        refused = await ask(api, session, web["id"], call_id, {"method": "sampling/createMessage", "params": SAMPLE})
        assert refused.status_code == 409
        assert "Client does not support sampling" in refused.json()["error"]["message"]
        roots = await ask(api, session, web["id"], call_id, {"method": "roots/list"})
        assert roots.status_code == 409
        await api.call(session, web["id"], call_id, "result", text="done")
        await asyncio.wait_for(calling, 10)


async def test_bad_params_of_an_mcp_request_are_400_naming_the_field(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])

    async def never(_context: Any, _params: mt.CreateMessageRequestParams) -> mt.CreateMessageResult:
        raise AssertionError("a refused request is never relayed")

    # Checked only for a caller that would be asked (it declared sampling): elsewhere 409 comes first.
    async with caller(api, session, sampling_callback=never) as client:
        calling = asyncio.create_task(client.session.call_tool(CALLED, {"word": "x"}, allow_input_required=True))
        call_id = await acked(api, session, web["id"])
        no_messages = await ask(api, session, web["id"], call_id, {"method": "sampling/createMessage", "params": {}})
        assert no_messages.status_code == 400
        assert no_messages.json()["error"]["message"].startswith("params.messages: ")
        huge = {**SAMPLE, "systemPrompt": "x" * 17_000}
        too_big = await ask(api, session, web["id"], call_id, {"method": "sampling/createMessage", "params": huge})
        assert too_big.status_code == 400
        assert "past the limit of 16384" in too_big.json()["error"]["message"]
        relayed = await ask(api, session, web["id"], call_id, {"method": "sampling/createMessage", "params": SAMPLE})
        assert isinstance(await asyncio.wait_for(calling, 10), mt.InputRequiredResult)
        # Its answer is MCP's result, which only the caller gives: anyone else may decline it.
        request_id = relayed.json()["request_id"]
        accepted = await answer(api, session, request_id, {"action": "accept"})
        assert accepted.status_code == 400
        assert accepted.json()["error"]["message"].startswith("action: a sampling/createMessage request is accepted")
        assert (await answer(api, session, request_id, {"action": "decline"})).status_code == 200
        await api.call(session, web["id"], call_id, "result", text="done")


async def test_a_tasks_input_requests_are_read_and_answered_through_the_task(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with caller(api, session, extensions=[Tasks()], elicitation_callback=Person()) as client:
        created = await start(client)
        await api.call(session, web["id"], created.task_id, "ack")
        who = {"message": "Who?", "schema": NAME_FORM, "key": "who"}
        asked = await ask(api, session, web["id"], created.task_id, who)
        waiting = await task_method(client, "tasks/get", created.task_id)
        assert waiting["status"] == "input_required"
        form = {"mode": "form", "message": "Who?", "requestedSchema": NAME_FORM}
        assert waiting["inputRequests"] == {"who": {"method": "elicitation/create", "params": form}}
        with pytest.raises(MCPError) as bad:
            await task_method(client, "tasks/update", created.task_id, inputResponses={"who": {"action": "accept"}})
        assert bad.value.error.message == "inputResponses.who.content.name: required"
        request_id = asked.json()["request_id"]
        assert (await read(api, session, request_id)).json()["state"] == "open"
        # A field the form does not ask is dropped; a key naming no open request is ignored.
        tess = {"action": "accept", "content": {"name": "Tess", "confirm": True}}
        given = {"who": tess, "stray": {"action": "cancel"}}
        await task_method(client, "tasks/update", created.task_id, inputResponses=given)
        answered = (await read(api, session, request_id)).json()
        assert (answered["state"], answered["content"]) == ("answered", {"name": "Tess"})
        await api.call(session, web["id"], created.task_id, "result", text="hello Tess")
        done = await settled(client, created.task_id)
    assert done["result"]["content"] == [{"type": "text", "text": "hello Tess"}]
