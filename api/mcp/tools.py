"""tools/list and tools/call: the session's client tools, called as a model calls them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import mcp.types as mt
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from api.mcp.content import call_result, error_result
from api.mcp.context import client_of, scoped, session_tools
from api.mcp.inputs import Relay, answer_responses, caller_asks, resumed
from api.mcp.names import shown, visible
from api.mcp.outcome import outcome
from api.mcp.tasks import DEFAULT_SUPPORT, as_task, created
from api.mcp.tracing import answered, call_span
from api.state import AppState
from broker.errors import NotFound, SwitchboardError
from broker.services.calls import Dispatched
from broker.services.runs import parse_client_tool
from common.policies import Rule, client_rule, denied_text
from common.schema.checks import Unchecked

CANCELLED_BY_CLIENT = "cancelled by the MCP client"


def _annotations(tool: dict[str, Any]) -> mt.ToolAnnotations | None:
    hints = tool.get("annotations")
    if not hints:
        return None
    try:
        return mt.ToolAnnotations.model_validate(hints)
    except ValidationError:
        return None


async def list_tools(ctx: Any, _params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
    client_name = client_of(ctx)
    tools = [
        mt.Tool(
            name=name,
            description=tool.get("description") or None,
            input_schema=tool.get("parameters") or {"type": "object"},
            annotations=_annotations(tool),
            execution=mt.ToolExecution(task_support=tool.get("task_support") or DEFAULT_SUPPORT),
        )
        for seen, (client, tool) in (await session_tools(ctx)).items()
        if (name := shown(client_name, seen, client, tool)) is not None
    ]
    return mt.ListToolsResult(tools=tools)


def _unknown(client_name: str | None, called: str, name: str) -> mt.CallToolResult:
    if client_name is not None:
        return error_result(f"no active client {client_name} serves a tool named {called} in this session")
    parsed = parse_client_tool(name)
    if parsed is not None:
        return error_result(f"no active client {parsed[0]} serves a tool named {parsed[1]} in this session")
    return error_result(
        f"no tool named {name} in this session (a client's tools are client__<client name>__<tool>; "
        "the active run's own tools go by their own names)"
    )


async def _allowed(
    state: AppState, session_id: str, name: str, tool: dict[str, Any], arguments: dict[str, Any]
) -> Rule | mt.CallToolResult:
    """The agent's rule for the call, or the error result that refuses it. Decided before anything is
    written: a denied call costs nothing."""
    try:
        policies = await state.broker.policies.client_policies(session_id)
    except NotFound as gone:
        return error_result(f"{name} cannot be called: the session's agent version cannot be read ({gone.message})")
    rule = client_rule(policies, name, tool.get("annotations"))
    if rule.policy == "deny":
        return error_result(denied_text(name))
    try:
        problem = await state.broker.arguments.problem(tool.get("parameters") or {}, arguments)
    except Unchecked as unchecked:
        return error_result(f"the arguments of {name} could not be checked: {unchecked}")
    if problem:
        return error_result(f"the arguments of {name} do not match its schema: {problem}")
    return rule


async def call_tool(
    ctx: Any, params: mt.CallToolRequestParams
) -> mt.CallToolResult | mt.InputRequiredResult | dict[str, Any]:
    """The call's result; a task (its CreateTaskResult) for a caller that declared the tasks extension,
    when the tool supports one; what the call asks first (an InputRequiredResult, to a 2026-07-28
    caller); for a retry carrying a request state, the same call's, once its responses answered it."""
    state, session_id, _ = scoped(ctx)
    client_name = client_of(ctx)
    name, arguments = visible(client_name, params.name), dict(params.arguments or {})
    if params.request_state is not None:
        return await _resume(ctx, state, session_id, params)
    # Found as a model's step finds it, by the name the model calls it by (the name its policy goes by).
    found = (await session_tools(ctx)).get(name)
    if found is None or shown(client_name, name, *found) is None:
        return _unknown(client_name, params.name, name)
    client, tool = found
    # Whether the call answers with a task is settled first: a caller that cannot take one for a tool
    # that must be one is refused before anything is checked or written.
    task = as_task(ctx, tool)
    rule = await _allowed(state, session_id, name, tool, arguments)
    if isinstance(rule, mt.CallToolResult):
        return rule

    with call_span(state.tracing, params, name, session_id) as span:
        traceparent = span.ref.traceparent if span.ref is not None else ""

        async def dispatch() -> Dispatched:
            sent = await state.broker.calls.dispatch(
                session_id,
                (client.client_id, client.name),
                str(tool["name"]),
                arguments,
                policy=rule.policy,
                name=name,
                timeout_ms=int(tool.get("timeout_s") or 0) * 1000,
                heartbeat_ms=int(tool.get("heartbeat_s") or 0) * 1000,
                on_leave=str(tool.get("on_leave") or ""),
                approval_timeout_ms=(rule.approval_timeout_s or 0) * 1000,
                # What the caller answers: which of the call's input requests go to it.
                asks=caller_asks(ctx),
                traceparent=traceparent,
            )
            span.set({"gen_ai.tool.call.id": sent.call_id})
            return sent

        if task and not tool.get("asks_first"):
            # The task is the call: nothing of this request waits for it, the caller polls its record (the
            # span is the call's dispatch; the client's own span is its child all the same).
            sent = await _made(dispatch)
            if isinstance(sent, mt.CallToolResult):
                answered(span, sent)
                return sent
            return await created(state, session_id, sent.call_id)
        # A task that asks first waits in line as any call does, so what it asks goes out as an
        # InputRequiredResult; the retry answering that becomes its task (_resume).
        result = await _in_line(ctx, state, session_id, dispatch, params, task=task)
        answered(span, result)
        return result


async def _in_line(
    ctx: Any,
    state: AppState,
    session_id: str,
    dispatch: Callable[[], Awaitable[Dispatched]],
    params: mt.CallToolRequestParams,
    *,
    task: bool,
) -> mt.CallToolResult | mt.InputRequiredResult:
    """The call made and its outcome waited for in this request (`task`: a retry answering what it asks
    gets its task)."""
    # Subscribed before the call is written, so no event of it can be missed. The request's stream slot
    # was taken by SessionMcp.handle. Responses sent with no request state answer what the call asks
    # under their keys.
    relay = Relay(state, session_id, ctx, params.input_responses)
    subscription = await state.hub.subscribe_session(session_id)
    try:
        sent = await _made(dispatch)
        if isinstance(sent, mt.CallToolResult):
            return sent
        # Bound to the name the caller called it by, which its retry repeats.
        relay.bind(sent.call_id, sent.seq, params.name, dict(params.arguments or {}), task=task)
        return await _followed(state, session_id, subscription, ctx, relay)
    finally:
        state.hub.unsubscribe(subscription)


async def _resume(
    ctx: Any, state: AppState, session_id: str, params: mt.CallToolRequestParams
) -> mt.CallToolResult | mt.InputRequiredResult | dict[str, Any]:
    """A retry answering what the call asked: it goes on waiting for the same call, or (a tool that asks
    first, for a caller that takes tasks) answers with the call's task at once."""
    sealed = await resumed(state, session_id, params)
    if sealed.task:
        problem = await answer_responses(state, session_id, sealed.call_id, dict(params.input_responses or {}))
        if problem is not None:
            raise MCPError(code=mt.INVALID_PARAMS, message=problem)
        return await created(state, session_id, sealed.call_id)
    relay = Relay(state, session_id, ctx, params.input_responses)
    # A call that ends before this subscription is found by the record check of a quiet spell: it holds a
    # request open (resumed checked) until this retry's responses answer it, which comes after.
    subscription = await state.hub.subscribe_session(session_id)
    try:
        relay.bind(sealed.call_id, sealed.seq, params.name, dict(params.arguments or {}))
        # Answered, and asked again at once of what the call still holds open (a request this retry left
        # unanswered, or one asked since).
        asked = await relay.asked(gather=False)
        return asked if asked is not None else await _followed(state, session_id, subscription, ctx, relay)
    finally:
        state.hub.unsubscribe(subscription)


async def _made(dispatch: Callable[[], Awaitable[Dispatched]]) -> Dispatched | mt.CallToolResult:
    """The call made, or what the caller is answered instead: the refusal, or the denial a decision
    remembered for the session gave at once."""
    try:
        sent = await dispatch()
    except SwitchboardError as refused:
        return error_result(refused.message)
    return call_result(sent.denial, None) if sent.denial is not None else sent


async def _followed(
    state: AppState, session_id: str, subscription: Any, ctx: Any, relay: Relay
) -> mt.CallToolResult | mt.InputRequiredResult:
    assert relay.bound is not None
    call_id = relay.bound.call_id
    try:
        return await outcome(state, session_id, call_id, relay.bound.seq, subscription, ctx, relay)
    except asyncio.CancelledError:
        # An MCP cancel, or the caller gone: no one waits for the call any more. One still waiting for
        # approval is resolved as denied, so no approver is left asked about it.
        with contextlib.suppress(SwitchboardError):
            await asyncio.shield(state.broker.calls.cancel(session_id, call_id, CANCELLED_BY_CLIENT))
        raise
