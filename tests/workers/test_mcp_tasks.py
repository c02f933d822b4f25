"""A grant's tools/call answered with a task: each answer about it read as still working (asked again at the
server's interval, within bounds) or its outcome as the call's result; a cancel sent and its silence
ignored. The polling itself, parked between polls, is tests/api/test_mcp_grant_tasks.py's."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp.types as mt
import pytest

from workers.mcp import tasks
from workers.mcp.mapped import Working


class _Server:
    """A task server scripted by the statuses its tasks/get answers give, in order (the last repeats)."""

    def __init__(self, statuses: list[dict[str, Any]], payload: dict[str, Any] | None = None) -> None:
        self.statuses = statuses
        self.payload = payload
        self.calls: list[tuple[str, dict[str, Any], float]] = []

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((method, params, asyncio.get_running_loop().time()))
        if method == "tasks/get":
            gets = sum(1 for call in self.calls if call[0] == "tasks/get")
            return {
                "resultType": "complete",
                "taskId": params["taskId"],
                **self.statuses[min(gets, len(self.statuses)) - 1],
            }
        if method == "tasks/result":
            assert self.payload is not None
            return self.payload
        return {"resultType": "complete"}

    def methods(self) -> list[str]:
        return [call[0] for call in self.calls]


def _created(interval_ms: int | None = 300) -> dict[str, Any]:
    body: dict[str, Any] = {"resultType": "task", "taskId": "t-1", "status": "working"}
    if interval_ms is not None:
        body["pollIntervalMs"] = interval_ms
    return body


def _text(result: mt.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    return block.text


def test_a_task_answer_is_told_from_a_result() -> None:
    assert tasks.is_task(_created())
    assert tasks.is_task({"task": {"taskId": "x", "status": "working"}})
    assert not tasks.is_task({"content": [], "isError": False})


def test_the_poll_interval_is_honoured_within_bounds() -> None:
    assert tasks.poll_s(_created(2000)) == 2.0
    assert tasks.poll_s(_created(1)) == tasks.MIN_POLL_S
    assert tasks.poll_s(_created(10**9)) == tasks.MAX_POLL_S
    assert tasks.poll_s(_created(None)) == 1.0
    assert tasks.poll_s({"task": {"pollInterval": 500}}) == 0.5


async def test_a_completed_task_is_the_calls_result() -> None:
    answer = {"content": [{"type": "text", "text": "done"}], "isError": False}
    server = _Server([{"status": "completed", "result": answer}])
    body = await server.send("tasks/get", {"taskId": "t-1"})
    result = await tasks.read(server.send, "t-1", body)
    assert isinstance(result, mt.CallToolResult)
    assert not result.is_error
    assert _text(result) == "done"


async def test_a_working_task_is_asked_again_at_the_servers_interval() -> None:
    server = _Server([{"status": "working", "pollIntervalMs": 300}])
    assert await tasks.read(server.send, "t-1", _created(300)) == Working("t-1", 0.3)
    assert server.methods() == []


async def test_a_2025_task_result_is_fetched_with_tasks_result() -> None:
    payload = {"content": [{"type": "text", "text": "old"}], "isError": False}
    server = _Server([{"status": "completed"}], payload)
    result = await tasks.read(server.send, "t-1", {"task": {"taskId": "t-1", "status": "completed"}})
    assert isinstance(result, mt.CallToolResult)
    assert _text(result) == "old"
    assert server.methods() == ["tasks/result"]


async def test_a_failed_task_fails_the_call_with_the_servers_message() -> None:
    server = _Server([{"status": "working"}])
    result = await tasks.read(server.send, "t-1", {"status": "failed", "statusMessage": "disk full"})
    assert isinstance(result, mt.CallToolResult)
    assert result.is_error
    assert "failed: disk full" in _text(result)


async def test_a_cancel_is_sent_and_its_silence_ignored() -> None:
    server = _Server([{"status": "working"}])
    await tasks.cancel(server.send, "t-1")
    assert server.calls[-1][:2] == ("tasks/cancel", {"taskId": "t-1"})

    async def silent(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise OSError("no answer")

    await tasks.cancel(silent, "t-1")


@pytest.mark.parametrize(
    "created", [{"resultType": "task", "status": "working"}, {"resultType": "task", "taskId": "x" * 300}]
)
def test_a_task_without_a_usable_id_fails_the_call(created: dict[str, Any]) -> None:
    result = tasks.task_id(created)
    assert isinstance(result, mt.CallToolResult)
    assert "without a taskId" in _text(result)


@pytest.mark.parametrize(
    ("body", "why", "cancelled"),
    [
        ({"taskId": "t", "status": "odd"}, "unknown status 'odd'", True),
        ({"taskId": "t", "status": "input_required"}, tasks.ASKED, True),
        ({"taskId": "t", "status": "completed", "result": {"content": 5}}, "not a tool result", False),
    ],
)
async def test_a_bad_task_answer_fails_the_call_saying_why(body: dict[str, Any], why: str, cancelled: bool) -> None:
    server = _Server([{"status": "working"}])
    result = await tasks.read(server.send, "t", body)
    assert isinstance(result, mt.CallToolResult)
    assert result.is_error
    assert why in _text(result)
    assert (server.methods() == ["tasks/cancel"]) is cancelled
