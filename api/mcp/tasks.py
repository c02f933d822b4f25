"""MCP Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663): a `tools/call` from a caller that
declared the extension answers with a task, and the task is the client call itself. Its id is the call
id, its state the call's record, its result the call's logged `tool_result`: everything is read from
Redis, so any API process serves `tasks/get`, `tasks/update` and `tasks/cancel`, after the caller's
connection dropped or the process that took the call went away. A task is looked up in the caller's
session only, so another session's call id is not found."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types import HEADER_MISMATCH, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from api.mcp import inputs
from api.mcp.content import DENIED, call_result
from api.mcp.context import scoped
from api.mcp.outcome import lacked_capability
from api.state import AppState
from broker.errors import Conflict, NotFound
from broker.services.calls import CallTask
from common.events.catalogue import TextBlock, ToolResult
from common.events.read import decode_known

EXTENSION = "io.modelcontextprotocol/tasks"
TaskSupport = Literal["forbidden", "optional", "required"]
DEFAULT_SUPPORT: TaskSupport = "optional"
# How often a caller is asked to poll: a client call is a person's tab or a worker answering, seconds
# rather than milliseconds.
POLL_INTERVAL_MS = 1000
# A failed task's error code: JSON-RPC's implementation-defined server error; the reason (client_gone,
# ack_timeout, result_timeout, denied, ...) leads the message and is `data.reason`.
CALL_FAILED = -32000
# A call cancelled (tasks/cancel, the session's cancel route) fails with this reason: no run waits for an
# MCP client's call, so for one it means cancelled.
CANCELLED_REASON = "run_gone"
_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
_NO_RESULT = "the call ended with no result logged"


class TaskParams(mt.RequestParams):
    task_id: str = Field(alias="taskId", min_length=1, max_length=200)


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


def missing_capability() -> MCPError:
    """The extension's error for a caller that must have declared it (-32021, naming it)."""
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"Missing required client capability: this needs the {EXTENSION} extension",
        data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def negotiated(ctx: Any) -> bool:
    """Whether this request's caller declared the extension: in its capabilities (each 2026-07-28
    request's envelope), or in the request's own `_meta` client capabilities."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        # A task is a 2026-era result shape: an older wire cannot carry it.
        return False
    capabilities = ctx.session.client_capabilities
    if capabilities is not None and capabilities.extensions and EXTENSION in capabilities.extensions:
        return True
    meta = (ctx.params or {}).get("_meta")
    declared = meta.get(_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = declared.get("extensions") if isinstance(declared, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def as_task(ctx: Any, tool: dict[str, Any]) -> bool:
    """Whether a call of `tool` answers with a task: a caller that declared the extension gets one for an
    `optional` or `required` tool; one that did not is refused a `required` tool (missing_capability)."""
    support = str(tool.get("task_support") or DEFAULT_SUPPORT)
    if support == "forbidden":
        return False
    if negotiated(ctx):
        return True
    if support == "required":
        raise missing_capability()
    return False


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _envelope(state: AppState, call_id: str, task: CallTask) -> dict[str, Any]:
    retention = state.broker.settings.settled_call_retention_ms
    return {
        "taskId": call_id,
        "createdAt": _iso(task.created_ms),
        "lastUpdatedAt": _iso(task.updated_ms),
        # A settled call's record is kept for the retention after it settled, so at least that long after
        # it was made; 0 keeps records as long as their session (no TTL).
        "ttlMs": retention or None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }


async def _found(state: AppState, session_id: str, call_id: str) -> CallTask:
    task = await state.broker.calls.task(session_id, call_id)
    if task is None:
        raise MCPError(code=INVALID_PARAMS, message=f"no task {call_id} in this session")
    return task


async def created(state: AppState, session_id: str, call_id: str) -> dict[str, Any]:
    """The CreateTaskResult of a call just dispatched (read back, so a tasks/get right after finds it)."""
    task = await _found(state, session_id, call_id)
    status = "input_required" if task.open_inputs else "working"
    return {"resultType": "task", **_envelope(state, call_id, task), "status": status}


async def _logged_result(state: AppState, session_id: str, call_id: str, seq: int) -> ToolResult:
    rows = await state.broker.log.after(session_id, seq - 1, 1) if seq else []
    for _, data in rows:
        event = decode_known(data)
        if isinstance(event, ToolResult) and event.call_id == call_id:
            return event
    return ToolResult(call_id=call_id, content=[], is_error=True)


def _text(result: ToolResult) -> str:
    texts = [block.data.text for block in result.content if isinstance(block, TextBlock)]
    return " ".join(texts) or _NO_RESULT


async def detailed(state: AppState, session_id: str, call_id: str, task: CallTask) -> dict[str, Any]:
    """The task as tasks/get (and a status notification) gives it: status, and the result, the error or
    the open input requests that status carries."""
    body = _envelope(state, call_id, task)
    if not task.settled:
        if task.open_inputs:
            requests = await inputs.input_requests(state, session_id, call_id)
            return {**body, "status": "input_required", "inputRequests": requests}
        return {**body, "status": "working"}
    result = await _logged_result(state, session_id, call_id, task.result_seq)
    if task.reason == CANCELLED_REASON:
        return {**body, "status": "cancelled", "statusMessage": _text(result)}
    refused = lacked_capability(task) if result.is_error else None
    if refused is not None:
        return {**body, "status": "failed", "statusMessage": refused.message, "error": refused.error.model_dump()}
    if task.state == "answered":
        answer = call_result(result, task).model_dump(by_alias=True, mode="json", exclude_none=True)
        return {**body, "status": "completed", "result": answer}
    reason = task.reason or DENIED
    message = f"{reason}: {_text(result)}"
    error = {"code": CALL_FAILED, "message": message, "data": {"reason": reason}}
    return {**body, "status": "failed", "statusMessage": message, "error": error}


def _checked(ctx: Any, params: TaskParams) -> tuple[AppState, str]:
    """The caller's app state and session, once it declared the extension and the `Mcp-Name` header it
    sent (SEP-2663: the task id, for routing) matches the task id in the body."""
    if not negotiated(ctx):
        raise missing_capability()
    headers = getattr(ctx.request, "headers", None)
    sent = headers.get(MCP_NAME_HEADER) if headers is not None else None
    if sent is not None and decode_header_value(sent.strip()) != params.task_id:
        raise MCPError(code=HEADER_MISMATCH, message="the Mcp-Name header does not match the request's taskId")
    state, session_id, _ = scoped(ctx)
    return state, session_id


async def get_task(ctx: Any, params: TaskParams) -> dict[str, Any]:
    state, session_id = _checked(ctx, params)
    task = await _found(state, session_id, params.task_id)
    return {"resultType": "complete", **await detailed(state, session_id, params.task_id, task)}


async def cancel_task(ctx: Any, params: TaskParams) -> dict[str, Any]:
    """Cancel the client call (acknowledged at once; a settled task stays as it is)."""
    state, session_id = _checked(ctx, params)
    await _found(state, session_id, params.task_id)
    try:
        await state.broker.calls.cancel(session_id, params.task_id, "cancelled by the MCP client (tasks/cancel)")
    except Conflict:
        pass
    except NotFound as gone:
        raise MCPError(code=INVALID_PARAMS, message=gone.message) from gone
    return {"resultType": "complete"}


async def update_task(ctx: Any, params: UpdateTaskParams) -> dict[str, Any]:
    """Answer the task's open input requests with the caller's `inputResponses` (a settled task's are
    ignored, as the extension says of responses nothing waits for)."""
    state, session_id = _checked(ctx, params)
    task = await _found(state, session_id, params.task_id)
    if not task.settled and params.input_responses:
        problem = await inputs.answer_responses(state, session_id, params.task_id, params.input_responses)
        if problem is not None:
            raise MCPError(code=INVALID_PARAMS, message=problem)
    return {"resultType": "complete"}


def register(server: Server[Any]) -> None:
    """Advertise the extension and serve its methods on `server` (tasks/result and tasks/list, which the
    extension removed, stay method-not-found)."""
    server.extensions[EXTENSION] = {}
    server.add_request_handler("tasks/get", TaskParams, get_task)
    server.add_request_handler("tasks/cancel", TaskParams, cancel_task)
    server.add_request_handler("tasks/update", UpdateTaskParams, update_task)
