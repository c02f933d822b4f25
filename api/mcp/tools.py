"""tools/list and tools/call: the session's client tools, called as a model calls them."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import mcp.types as mt
from pydantic import ValidationError

from api.mcp.content import call_result, error_result
from api.mcp.context import scoped
from api.mcp.inputs import Relay, resumed
from api.mcp.outcome import outcome
from api.state import AppState
from broker.errors import NotFound, SwitchboardError
from broker.services.runs import client_tools, parse_client_tool
from common.policies import client_rule, denied_text
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
    state, session_id, _ = scoped(ctx)
    tools = [
        mt.Tool(
            name=visible,
            description=tool.get("description") or None,
            input_schema=tool.get("parameters") or {"type": "object"},
            annotations=_annotations(tool),
        )
        for visible, (_, tool) in client_tools(await state.broker.runs.offered(session_id)).items()
    ]
    return mt.ListToolsResult(tools=tools)


async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult | mt.InputRequiredResult:
    state, session_id, _ = scoped(ctx)
    if params.request_state is not None:
        # A retry answering what the call asked: it goes on waiting for the same call.
        return await _resume(ctx, state, session_id, params)
    name, arguments = params.name, dict(params.arguments or {})
    # Found as a model's step finds it, by the name the model calls it by (the name its policy goes by).
    found = client_tools(await state.broker.runs.offered(session_id)).get(name)
    if found is None:
        parsed = parse_client_tool(name)
        if parsed is not None:
            return error_result(f"no active client {parsed[0]} serves a tool named {parsed[1]} in this session")
        return error_result(
            f"no tool named {name} in this session (a client's tools are client__<client name>__<tool>; "
            "the active run's own tools go by their own names)"
        )
    client, tool = found
    # The agent's policy, decided before anything is checked or written: a denied call costs nothing.
    try:
        policies = await state.broker.policies.client_policies(session_id)
    except NotFound as gone:
        return error_result(f"{name} cannot be called: the session's agent version cannot be read ({gone.message})")
    rule = client_rule(policies, name, tool.get("annotations"))
    policy = rule.policy
    if policy == "deny":
        return error_result(denied_text(name))
    try:
        problem = await state.broker.arguments.problem(tool.get("parameters") or {}, arguments)
    except Unchecked as unchecked:
        return error_result(f"the arguments of {name} could not be checked: {unchecked}")
    if problem:
        return error_result(f"the arguments of {name} do not match its schema: {problem}")
    # Subscribed before the call is written, so no event of it can be missed. The request's stream slot
    # was taken by SessionMcp.handle. Responses sent with no request state answer what the call asks
    # under their keys.
    relay = Relay(state, session_id, ctx, params.input_responses)
    subscription = await state.hub.subscribe_session(session_id)
    try:
        try:
            sent = await state.broker.calls.dispatch(
                session_id,
                (client.client_id, client.name),
                str(tool["name"]),
                arguments,
                policy=policy,
                name=name,
                timeout_ms=int(tool.get("timeout_s") or 0) * 1000,
                heartbeat_ms=int(tool.get("heartbeat_s") or 0) * 1000,
                on_leave=str(tool.get("on_leave") or ""),
                approval_timeout_ms=(rule.approval_timeout_s or 0) * 1000,
                asks=relay.asks,
            )
        except SwitchboardError as refused:
            return error_result(refused.message)
        if sent.denial is not None:
            return call_result(sent.denial, None)
        # Bound to the name the caller called it by, which its retry repeats.
        relay.bind(sent.call_id, sent.seq, params.name, arguments)
        return await _followed(state, session_id, subscription, ctx, relay, first=None)
    finally:
        relay.close()
        state.hub.unsubscribe(subscription)


async def _resume(
    ctx: Any, state: AppState, session_id: str, params: mt.CallToolRequestParams
) -> mt.CallToolResult | mt.InputRequiredResult:
    relay = Relay(state, session_id, ctx, params.input_responses)
    subscription = await state.hub.subscribe_session(session_id)
    try:
        sealed = await resumed(state, session_id, params)
        relay.bind(sealed.call_id, sealed.seq, params.name, dict(params.arguments or {}))
        # Answered, and asked again at once of what the call still holds open (a request this retry left
        # unanswered, or one asked since).
        return await _followed(state, session_id, subscription, ctx, relay, first=await relay.asked(gather=False))
    finally:
        relay.close()
        state.hub.unsubscribe(subscription)


async def _followed(
    state: AppState, session_id: str, subscription: Any, ctx: Any, relay: Relay, first: mt.InputRequiredResult | None
) -> mt.CallToolResult | mt.InputRequiredResult:
    assert relay.bound is not None
    call_id = relay.bound.call_id
    if first is not None:
        return first
    try:
        return await outcome(state, session_id, call_id, relay.bound.seq, subscription, ctx, relay)
    except asyncio.CancelledError:
        # An MCP cancel, or the caller gone: no one waits for the call any more. One still waiting for
        # approval is resolved as denied, so no approver is left asked about it.
        with contextlib.suppress(SwitchboardError):
            await asyncio.shield(state.broker.calls.cancel(session_id, call_id, CANCELLED_BY_CLIENT))
        raise
