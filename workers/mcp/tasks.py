"""Following a task an MCP server answers a grant's `tools/call` with (the Tasks extension,
`io.modelcontextprotocol/tasks`, and the 2025-11-25 shape): `tasks/get` at the server's poll interval until
the task settles, its result then the call's, `tasks/cancel` when the call is cancelled or runs out of time.

The wire is passed in as `send(method, params) -> result body`, so the poller knows only the task's
shapes and the connection keeps its transport, headers and budgets."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import mcp.types as mt
from pydantic import ValidationError

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
ASKED = "The MCP server asked for input, which a grant cannot give yet."


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


async def cancel(send: Send, task_id: str) -> None:
    """Ask the server to stop the task, within CANCEL_TIMEOUT_S; its answer, or none, changes nothing."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CANCEL_TIMEOUT_S):
            await send("tasks/cancel", {"taskId": task_id})


async def _result(send: Send, task_id: str, fields: dict[str, Any]) -> mt.CallToolResult:
    payload = fields.get("result")
    if not isinstance(payload, dict):
        # 2025-11-25: a completed task's payload is fetched with tasks/result.
        payload = await send("tasks/result", {"taskId": task_id})
    try:
        return mt.CallToolResult.model_validate(payload)
    except ValidationError:
        return failed("The MCP server's task completed with a result that is not a tool result.")


async def follow(send: Send, created: dict[str, Any], deadline: float, timeout_s: float) -> mt.CallToolResult:
    """The task's outcome as the call's result; `deadline` (loop time) bounds the polling, and a task still
    working then is cancelled and the call fails saying so. Cancelling the awaiting task cancels the task."""
    task_id = _fields(created).get("taskId")
    if not isinstance(task_id, str) or not task_id or len(task_id) > MAX_TASK_ID_CHARS:
        return failed(f"The MCP server answered with a task without a taskId of 1 to {MAX_TASK_ID_CHARS} characters.")
    loop = asyncio.get_running_loop()
    body = created
    try:
        while True:
            fields = _fields(body)
            status = fields.get("status")
            message = str(fields.get("statusMessage") or "")[:2000]
            if status == "completed":
                return await _result(send, task_id, fields)
            if status in ("failed", "cancelled"):
                return failed(f"The MCP server's task {status}" + (f": {message}" if message else "."))
            if status == "input_required":
                await cancel(send, task_id)
                return failed(ASKED)
            if status != "working":
                await cancel(send, task_id)
                return failed(f"The MCP server's task has an unknown status {str(status)[:100]!r}.")
            wait = poll_s(body)
            if loop.time() + wait >= deadline:
                await cancel(send, task_id)
                return failed(
                    f"The MCP server's task did not finish within the tool's {timeout_s:.3g} s; it was cancelled."
                )
            await asyncio.sleep(wait)
            async with asyncio.timeout_at(deadline):
                body = await send("tasks/get", {"taskId": task_id})
    except TimeoutError:
        await cancel(send, task_id)
        return failed(f"The MCP server's task did not finish within the tool's {timeout_s:.3g} s; it was cancelled.")
    except asyncio.CancelledError:
        await asyncio.shield(cancel(send, task_id))
        raise
