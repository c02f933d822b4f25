"""Reading a task an MCP server answers a grant's `tools/call` with (the Tasks extension,
`io.modelcontextprotocol/tasks`, and the 2025-11-25 shape): what one answer about it says (still working,
and when to ask again; or its outcome as the call's result), and `tasks/cancel`.

A task is followed one `tasks/get` at a time with no worker holding the call in between
(workers/server_tools.py parks the call in Redis until its next poll), so this module reads answers and
keeps nothing. The wire is passed in as `send(method, params) -> result body`, so it knows only the
task's shapes and the connection keeps its transport, headers and budgets."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import mcp.types as mt
from pydantic import ValidationError

from workers.mcp.mapped import Working

EXTENSION = "io.modelcontextprotocol/tasks"
Send = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]

# A server asking for less would have every waiting call hammer it; one asking for more would leave a
# finished task unread for long. Its interval is honoured within these.
MIN_POLL_S = 0.25
MAX_POLL_S = 30.0
# Beyond an id this long a server is not naming a task but sending junk back to itself.
MAX_TASK_ID_CHARS = 256
# tasks/cancel is a courtesy to the server: the call ends whether or not it answers.
CANCEL_TIMEOUT_S = 5.0
ASKED = "The MCP server's task asked for input, which a grant's task cannot give; it was cancelled."


def is_task(answer: dict[str, Any]) -> bool:
    """Whether a tools/call answer is a task rather than the tool's result."""
    return answer.get("resultType") == "task" or isinstance(answer.get("task"), dict)


def _fields(body: dict[str, Any]) -> dict[str, Any]:
    # The 2025-11-25 CreateTaskResult nests the task; the extension's results carry it flat.
    nested = body.get("task")
    return nested if isinstance(nested, dict) else body


def poll_s(body: dict[str, Any]) -> float:
    """The wait before the next tasks/get: the server's interval (ms) within MIN_POLL_S..MAX_POLL_S."""
    fields = _fields(body)
    interval = fields.get("pollIntervalMs", fields.get("pollInterval"))
    if isinstance(interval, bool) or not isinstance(interval, int | float):
        return 1.0
    return min(MAX_POLL_S, max(MIN_POLL_S, interval / 1000))


def failed(text: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)


def too_late(timeout_s: float) -> mt.CallToolResult:
    return failed(f"The MCP server's task did not finish within the tool's {timeout_s:.3g} s; it was cancelled.")


def task_id(created: dict[str, Any]) -> str | mt.CallToolResult:
    """The id of the task a tools/call answer created, or the call's failure for one without a usable id."""
    found = _fields(created).get("taskId")
    if not isinstance(found, str) or not found or len(found) > MAX_TASK_ID_CHARS:
        return failed(f"The MCP server answered with a task without a taskId of 1 to {MAX_TASK_ID_CHARS} characters.")
    return found


async def cancel(send: Send, task: str) -> None:
    """Ask the server to stop the task, within CANCEL_TIMEOUT_S; its answer, or none, changes nothing."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CANCEL_TIMEOUT_S):
            await send("tasks/cancel", {"taskId": task})


async def _result(send: Send, task: str, fields: dict[str, Any]) -> mt.CallToolResult:
    payload = fields.get("result")
    if not isinstance(payload, dict):
        # 2025-11-25: a completed task's payload is fetched with tasks/result.
        payload = await send("tasks/result", {"taskId": task})
    try:
        return mt.CallToolResult.model_validate(payload)
    except ValidationError:
        return failed("The MCP server's task completed with a result that is not a tool result.")


async def read(send: Send, task: str, body: dict[str, Any]) -> mt.CallToolResult | Working:
    """What an answer about the task (its creation, or a tasks/get) says: its outcome as the call's result
    (a task that asks for input, or has an unknown status, is cancelled and fails the call), or Working."""
    fields = _fields(body)
    status = fields.get("status")
    message = str(fields.get("statusMessage") or "")[:2000]
    if status == "completed":
        return await _result(send, task, fields)
    if status in ("failed", "cancelled"):
        return failed(f"The MCP server's task {status}" + (f": {message}" if message else "."))
    if status == "input_required":
        await cancel(send, task)
        return failed(ASKED)
    if status != "working":
        await cancel(send, task)
        return failed(f"The MCP server's task has an unknown status {str(status)[:100]!r}.")
    return Working(task, poll_s(body))
