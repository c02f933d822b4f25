"""A grant's tools/call answered with a task: polled at the server's interval (within bounds) to its result,
its failure or its time limit, and cancelled at the server when the call is."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp.types as mt
import pytest

from workers.mcp import tasks


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


def _deadline(seconds: float) -> float:
    return asyncio.get_running_loop().time() + seconds


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


async def test_a_task_is_polled_to_its_result_at_the_servers_interval() -> None:
    answer = {"content": [{"type": "text", "text": "done"}], "isError": False}
    server = _Server([{"status": "working", "pollIntervalMs": 300}, {"status": "completed", "result": answer}])
    start = asyncio.get_running_loop().time()
    result = await tasks.follow(server.send, _created(300), _deadline(10), 10)
    assert not result.is_error
    assert _text(result) == "done"
    assert server.methods() == ["tasks/get", "tasks/get"]
    first, second = (call[2] for call in server.calls)
    assert first - start >= 0.29
    assert second - first >= 0.29


async def test_a_2025_task_result_is_fetched_with_tasks_result() -> None:
    payload = {"content": [{"type": "text", "text": "old"}], "isError": False}
    server = _Server([{"status": "completed"}], payload)
    created = {"task": {"taskId": "t-1", "status": "working", "pollInterval": 250}}
    result = await tasks.follow(server.send, created, _deadline(10), 10)
    assert _text(result) == "old"
    assert server.methods() == ["tasks/get", "tasks/result"]


async def test_a_failed_task_fails_the_call_with_the_servers_message() -> None:
    server = _Server([{"status": "failed", "statusMessage": "disk full"}])
    result = await tasks.follow(server.send, _created(250), _deadline(10), 10)
    assert result.is_error
    assert "failed: disk full" in _text(result)


async def test_an_endless_task_ends_at_the_tools_timeout_and_is_cancelled() -> None:
    server = _Server([{"status": "working", "pollIntervalMs": 250}])
    result = await tasks.follow(server.send, _created(250), _deadline(1.2), 1.2)
    assert result.is_error
    assert "did not finish within the tool's 1.2 s" in _text(result)
    assert server.methods()[-1] == "tasks/cancel"
    assert server.calls[-1][1] == {"taskId": "t-1"}
    assert 2 <= server.methods().count("tasks/get") <= 5


async def test_cancelling_the_call_sends_tasks_cancel() -> None:
    server = _Server([{"status": "working", "pollIntervalMs": 250}])
    following = asyncio.create_task(tasks.follow(server.send, _created(250), _deadline(30), 30))
    await asyncio.sleep(0.6)
    following.cancel()
    with pytest.raises(asyncio.CancelledError):
        await following
    assert server.methods()[-1] == "tasks/cancel"


@pytest.mark.parametrize(
    ("created", "why"),
    [
        ({"resultType": "task", "status": "working"}, "without a taskId"),
        ({"resultType": "task", "taskId": "x" * 300, "status": "working"}, "without a taskId"),
        ({"resultType": "task", "taskId": "t", "status": "odd"}, "unknown status 'odd'"),
        ({"resultType": "task", "taskId": "t", "status": "input_required"}, tasks.ASKED),
        ({"resultType": "task", "taskId": "t", "status": "completed", "result": {"content": 5}}, "not a tool result"),
    ],
)
async def test_a_bad_task_answer_fails_the_call_saying_why(created: dict[str, Any], why: str) -> None:
    server = _Server([{"status": "working"}])
    result = await tasks.follow(server.send, created, _deadline(5), 5)
    assert result.is_error
    assert why in _text(result)
