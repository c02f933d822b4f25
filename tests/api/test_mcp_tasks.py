"""MCP Tasks on the session MCP server: the `mcp` package's client, declaring the tasks extension, gets a
task for a client tool's call, and follows it with tasks/get, tasks/cancel and tasks/update while a
registered HTTP client answers the call."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from api.mcp.tasks import EXTENSION
from tests.api_client import Api, Session, of_type
from tests.e2e.served import process_api, process_set

pytestmark = pytest.mark.both_redis

MISSING_CAPABILITY, HEADER_MISMATCH, CALL_FAILED = -32021, -32020, -32000
INVALID_PARAMS, METHOD_NOT_FOUND = -32602, -32601
TERMINAL = {"completed", "failed", "cancelled"}
ACCOUNT = {"type": "object", "properties": {"account": {"type": "string"}}}


def lookup(**declared: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"word": {"type": "string"}}}
    return {"name": "lookup", "description": "Look a word up", "parameters": parameters, **declared}


class CreatedTask(mt.Result):
    """A tools/call answered with a task (the extension's CreateTaskResult)."""

    result_type: Literal["task"]
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class TaskRequest(mt.Request[dict[str, Any], str]):
    # SEP-2663: the task id goes in the Mcp-Name header too.
    name_param = "taskId"


class Answer(BaseModel):
    """Any result, its wire keys as sent."""

    model_config = ConfigDict(extra="allow")


async def _unclaimed(_created: CreatedTask, _ctx: ClaimContext) -> mt.CallToolResult:
    raise AssertionError("the tests read tasks through allow_claimed")


class Tasks(ClientExtension):
    identifier = EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=_unclaimed)]


@contextlib.asynccontextmanager
async def mcp_client(api: Api, session: Session, *, tasks: bool = True, url: str = "") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {session.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        endpoint = f"{url or api.stack.url}/v1/sessions/{session.id}/mcp"
        transport = streamable_http_client(endpoint, http_client=http)
        async with Client(transport, cache=None, extensions=[Tasks()] if tasks else None) as client:
            yield client


async def start(client: Client, name: str = "client__web__lookup") -> CreatedTask:
    answer = await client.session.call_tool(name, {"word": "switch"}, allow_claimed=True)
    assert isinstance(answer, CreatedTask), answer
    return answer


async def task_method(client: Client, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    request = TaskRequest(method=method, params={"taskId": task_id, **params})
    return (await client.session.send_request(request, Answer)).model_dump()


def answered(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a raw POST, sent as JSON or as one SSE event."""
    if response.headers.get("content-type", "").startswith("application/json"):
        body: dict[str, Any] = response.json()
        return body
    data = next(line for line in response.text.splitlines() if line.startswith("data: "))
    parsed: dict[str, Any] = json.loads(data.removeprefix("data: "))
    return parsed


async def settled(client: Client, task_id: str, timeout: float = 10) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    until = loop.time() + timeout
    while True:
        task = await task_method(client, "tasks/get", task_id)
        if task["status"] in TERMINAL or loop.time() > until:
            return task
        await asyncio.sleep(0.1)


async def test_a_task_is_the_client_call_and_carries_its_result(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[lookup()])
    async with mcp_client(api, session) as client:
        created = await start(client)
        # Durable at once: the very next tasks/get finds it.
        working = await task_method(client, "tasks/get", created.task_id)
        (event,) = of_type(await api.events(session), "client_tool_dispatched")
        assert created.task_id == event["call_id"]
        assert (created.status, working["status"], working["resultType"]) == ("working", "working", "complete")
        assert created.ttl_ms is not None
        assert created.ttl_ms > 0
        assert created.poll_interval_ms == 1000
        assert not {"result", "error", "requestState"} & working.keys()
        assert (await api.call(session, web["id"], event["call_id"], "ack")).status_code == 200
        answered = await api.call(session, web["id"], event["call_id"], "result", text="a device that connects")
        assert answered.status_code == 204
        done = await settled(client, created.task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "a device that connects"}]
    assert done["result"]["isError"] is False
    assert done["createdAt"] == created.created_at
    assert done["lastUpdatedAt"] >= created.last_updated_at


async def test_a_tool_error_is_a_completed_task_with_an_error_result(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[lookup()])
    async with mcp_client(api, session) as client:
        created = await start(client)
        await api.call(session, web["id"], created.task_id, "ack")
        await api.call(session, web["id"], created.task_id, "result", text="no such word", is_error=True)
        done = await settled(client, created.task_id)
    assert (done["status"], done["result"]["isError"]) == ("completed", True)
    assert "error" not in done


@pytest.mark.short_deadlines
async def test_a_failed_call_is_a_failed_task_with_a_numeric_code_and_the_reason(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[lookup()])
    async with mcp_client(api, session) as client:
        created = await start(client)
        done = await settled(client, created.task_id, timeout=15)
    assert done["status"] == "failed"
    assert "result" not in done
    assert done["error"]["code"] == CALL_FAILED
    assert done["error"]["message"].startswith("ack_timeout: the client did not acknowledge the call")
    assert done["error"]["data"] == {"reason": "ack_timeout"}


async def test_a_task_waits_for_its_approval_and_a_deny_fails_it(api: Api) -> None:
    session = await api.session(client_tool_policies={"client__web__lookup": "require_approval"})
    await api.register(session, tools=[lookup()])
    async with mcp_client(api, session) as client:
        created = await start(client)
        waiting = await task_method(client, "tasks/get", created.task_id)
        async with api.as_session(session) as http:
            path = f"/v1/sessions/{session.id}/approvals/{created.task_id}"
            decided = await http.post(path, json={"decision": "deny", "message": "not today"})
        assert decided.status_code == 200, decided.text
        done = await settled(client, created.task_id)
    assert waiting["status"] == "working"
    assert done["status"] == "failed"
    assert done["error"]["data"] == {"reason": "denied"}
    assert "not today" in done["error"]["message"]


async def test_a_client_that_leaves_fails_the_task_with_client_gone(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[lookup()])
    async with mcp_client(api, session) as client:
        created = await start(client)
        async with api.as_session(session) as http:
            assert (await http.delete(f"/v1/sessions/{session.id}/clients/{web['id']}")).status_code == 204
        done = await settled(client, created.task_id)
    assert (done["status"], done["error"]["data"]["reason"]) == ("failed", "client_gone")


async def test_cancel_cancels_the_client_call_and_is_idempotent(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[lookup()])
    async with mcp_client(api, session) as client:
        created = await start(client)
        ack = await task_method(client, "tasks/cancel", created.task_id)
        assert ack.get("resultType") == "complete"
        assert not {"taskId", "status", "result", "error"} & ack.keys()
        done = await settled(client, created.task_id)
        again = await task_method(client, "tasks/cancel", created.task_id)
    assert done["status"] == "cancelled"
    assert again.get("resultType") == "complete"
    events = await api.events(session)
    (failed,) = of_type(events, "client_tool_failed")
    assert (failed["call_id"], failed["reason"], failed.get("detail")) == (created.task_id, "run_gone", "cancelled")
    assert (await api.call(session, web["id"], created.task_id, "ack")).status_code == 409


async def test_an_open_input_request_makes_the_task_input_required(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[lookup()])
    async with mcp_client(api, session) as client:
        created = await start(client)
        await api.call(session, web["id"], created.task_id, "ack")
        asked = await api.call(
            session, web["id"], created.task_id, "input-requests", message="Which account?", schema=ACCOUNT
        )
        assert asked.status_code == 201, asked.text
        waiting = await task_method(client, "tasks/get", created.task_id)
        assert waiting["status"] == "input_required"
        assert isinstance(waiting["inputRequests"], dict)
        await api.call(session, web["id"], created.task_id, "result", text="done")
        done = await settled(client, created.task_id)
        # Responses to a task that no longer waits for them are ignored, as the extension says.
        late = await task_method(client, "tasks/update", created.task_id, inputResponses={"x": {"action": "cancel"}})
    assert done["status"] == "completed"
    assert late.get("resultType") == "complete"


async def test_task_support_decides_in_line_or_task_and_is_listed(api: Api) -> None:
    session = await api.session()
    tools = [
        lookup(),
        {**lookup(task_support="forbidden"), "name": "quick"},
        {**lookup(task_support="required"), "name": "slow"},
    ]
    web = await api.register(session, tools=tools)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Authorization": f"Bearer {session.token}", "MCP-Protocol-Version": "2025-11-25"}
    async with httpx2.AsyncClient(timeout=10) as http:
        listed = await http.post(f"{api.stack.url}/v1/sessions/{session.id}/mcp", json=body, headers=headers)
    support = {t["name"]: t["execution"]["taskSupport"] for t in answered(listed)["result"]["tools"]}
    assert support == {
        "client__web__lookup": "optional",
        "client__web__quick": "forbidden",
        "client__web__slow": "required",
    }

    async def answer(count: int) -> None:
        events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) >= count)
        call_id = of_type(events, "client_tool_dispatched")[-1]["call_id"]
        await api.call(session, web["id"], call_id, "ack")
        await api.call(session, web["id"], call_id, "result", text="in line")

    async with mcp_client(api, session) as client:
        answering = asyncio.create_task(answer(1))
        in_line = await client.session.call_tool("client__web__quick", {"word": "a"}, allow_claimed=True)
        await answering
        assert isinstance(in_line, mt.CallToolResult)
    async with mcp_client(api, session, tasks=False) as plain:
        with pytest.raises(MCPError) as refused:
            await plain.call_tool("client__web__slow", {"word": "b"})
        answering = asyncio.create_task(answer(2))
        optional = await plain.call_tool("client__web__lookup", {"word": "c"})
        await answering
    assert refused.value.code == MISSING_CAPABILITY
    assert refused.value.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    assert isinstance(optional.content[0], mt.TextContent)
    assert optional.content[0].text == "in line"
    # The refused call was never dispatched.
    assert len(of_type(await api.events(session), "client_tool_dispatched")) == 2


async def test_bad_task_ids_and_methods_are_refused(api: Api) -> None:
    session = await api.session()
    other = await api.session()
    await api.register(session, tools=[lookup()])
    await api.register(other, tools=[lookup()])
    async with mcp_client(api, other) as client:
        theirs = await start(client)
    async with mcp_client(api, session) as client:
        for method in ("tasks/get", "tasks/cancel"):
            for task_id in ("mcp_nonexistent", theirs.task_id):
                with pytest.raises(MCPError) as unknown:
                    await task_method(client, method, task_id)
                assert unknown.value.code == INVALID_PARAMS, (method, task_id)
        with pytest.raises(MCPError) as unanswerable:
            await task_method(client, "tasks/update", theirs.task_id, inputResponses={})
        assert unanswerable.value.code == INVALID_PARAMS
        mine = await start(client)
        for bad in ({}, {"inputResponses": ["not", "a", "map"]}):
            with pytest.raises(MCPError) as malformed:
                await task_method(client, "tasks/update", mine.task_id, **bad)
            assert malformed.value.code == INVALID_PARAMS, bad
        for task_id in ("", "x" * 201):
            with pytest.raises(MCPError) as bad_id:
                await task_method(client, "tasks/get", task_id)
            assert bad_id.value.code == INVALID_PARAMS, task_id
        for removed in ("tasks/result", "tasks/list"):
            with pytest.raises(MCPError) as gone:
                await task_method(client, removed, mine.task_id)
            assert gone.value.code == METHOD_NOT_FOUND
    # Another session's task is untouched: still working, never cancelled.
    assert not of_type(await api.events(other), "client_tool_failed")
    async with mcp_client(api, session, tasks=False) as plain:
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            with pytest.raises(MCPError) as ungated:
                await task_method(plain, method, mine.task_id, **({"inputResponses": {}} if "update" in method else {}))
            assert ungated.value.code == MISSING_CAPABILITY, method


async def test_a_call_a_run_made_is_no_task(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[lookup()])
    await api.send(session, '/call client__web__lookup {"word": "run"}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")), timeout=10)
    (dispatched,) = of_type(events, "client_tool_dispatched")
    async with mcp_client(api, session) as client:
        with pytest.raises(MCPError) as unknown:
            await task_method(client, "tasks/get", dispatched["call_id"])
    assert unknown.value.code == INVALID_PARAMS


async def test_the_mcp_name_header_must_match_the_task_id(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[lookup()])
    async with mcp_client(api, session) as client:
        created = await start(client)
        url = f"{api.stack.url}/v1/sessions/{session.id}/mcp"
        body = raw_body("tasks/get", {"taskId": created.task_id})
        async with httpx2.AsyncClient(timeout=10) as http:
            right = await http.post(url, json=body, headers=raw_headers(session, "tasks/get", created.task_id))
            wrong = await http.post(url, json=body, headers=raw_headers(session, "tasks/get", "another-task"))
    assert answered(right)["result"]["taskId"] == created.task_id, right.text
    assert answered(wrong)["error"]["code"] == HEADER_MISMATCH, wrong.text


def raw_headers(session: Session, method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {session.token}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        "Accept": "application/json, text/event-stream",
    }
    return {**headers, "Mcp-Name": name} if name is not None else headers


def raw_body(method: str, params: dict[str, Any], *, tasks: bool = True) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"extensions": {EXTENSION: {}}} if tasks else {}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    return {"jsonrpc": "2.0", "id": 9, "method": method, "params": {**params, "_meta": meta}}


async def listened(api: Api, session: Session, body: dict[str, Any], frames: list[dict[str, Any]]) -> None:
    """Follow a `subscriptions/listen` stream (`body`) of the session's MCP endpoint, each frame it sends
    added to `frames`, until it ends."""
    url = f"{api.stack.url}/v1/sessions/{session.id}/mcp"
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        http.stream("POST", url, json=body, headers=raw_headers(session, "subscriptions/listen")) as stream,
    ):
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line.removeprefix("data: ")))


async def test_status_notifications_follow_a_task_on_a_listen_stream(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[lookup()])
    async with mcp_client(api, session) as client:
        created = await start(client)
    body = raw_body("subscriptions/listen", {"notifications": {"taskIds": [created.task_id, "mcp_unknown"]}})
    frames: list[dict[str, Any]] = []
    following = asyncio.create_task(listened(api, session, body, frames))
    for _ in range(100):
        if len(frames) >= 2:
            break
        await asyncio.sleep(0.05)
    await api.call(session, web["id"], created.task_id, "ack")
    await api.call(session, web["id"], created.task_id, "result", text="told")
    await asyncio.wait_for(following, 15)
    ack, *statuses, end = frames
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"taskIds": [created.task_id]}
    assert {f["method"] for f in statuses} == {"notifications/tasks"}
    assert statuses[0]["params"]["status"] == "working"
    assert statuses[-1]["params"]["status"] == "completed"
    assert statuses[-1]["params"]["result"]["content"] == [{"type": "text", "text": "told"}]
    subscription = {"io.modelcontextprotocol/subscriptionId": 9}
    assert all(subscription.items() <= f["params"]["_meta"].items() for f in [ack, *statuses])
    assert end["id"] == 9
    assert "result" in end


async def test_status_notifications_need_the_extension(api: Api) -> None:
    session = await api.session()
    url = f"{api.stack.url}/v1/sessions/{session.id}/mcp"
    headers = raw_headers(session, "subscriptions/listen")
    ungated = raw_body("subscriptions/listen", {"notifications": {"taskIds": ["mcp_x"]}}, tasks=False)
    too_many = raw_body("subscriptions/listen", {"notifications": {"taskIds": [f"t{i}" for i in range(101)]}})
    async with httpx2.AsyncClient(timeout=10) as http:
        refused = answered(await http.post(url, json=ungated, headers=headers))
        bad = answered(await http.post(url, json=too_many, headers=headers))
    assert refused["error"]["code"] == MISSING_CAPABILITY
    assert bad["error"]["code"] == INVALID_PARAMS
    assert "at most 100" in bad["error"]["message"]


async def test_a_bad_task_support_is_400_naming_the_field(api: Api) -> None:
    session = await api.session()
    body = {"name": "web", "lifetime": {"type": "never"}, "tools": [lookup(task_support="sometimes")]}
    async with api.as_session(session) as http:
        answer = await http.post(f"/v1/sessions/{session.id}/clients", json=body)
    assert answer.status_code == 400
    assert "task_support" in answer.text
    assert "forbidden" in answer.text


async def test_a_task_is_picked_up_from_another_api_process_after_the_first_is_gone(
    redis_url: str, tmp_path: Path
) -> None:
    with process_set(redis_url, tmp_path / "logs") as processes:
        async with process_api(processes) as first, process_api(processes) as second:
            session = await first.session()
            web = await first.register(session, tools=[lookup()])
            async with mcp_client(first, session) as client:
                created = await start(client)
            # The caller's connection is gone, and so is the process that took the call.
            processes.stop(processes.running[0], signal.SIGKILL)
            async with mcp_client(second, session) as client:
                working = await task_method(client, "tasks/get", created.task_id)
                await second.call(session, web["id"], created.task_id, "ack")
                await second.call(session, web["id"], created.task_id, "result", text="answered elsewhere")
                done = await settled(client, created.task_id)
    assert working["status"] == "working"
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "answered elsewhere"
