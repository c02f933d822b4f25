"""tools/list and tools/call: the session's client tools, called as a model calls them."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import mcp.types as mt
from pydantic import ValidationError

from api.mcp.content import call_result, error_result
from api.mcp.context import client_of, scoped
from api.mcp.names import shown, visible
from api.mcp.outcome import outcome
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
    client_name = client_of(ctx)
    tools = [
        mt.Tool(
            name=name,
            description=tool.get("description") or None,
            input_schema=tool.get("parameters") or {"type": "object"},
            annotations=_annotations(tool),
        )
        for seen, (client, tool) in client_tools(await state.broker.runs.offered(session_id)).items()
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


async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
    state, session_id, _ = scoped(ctx)
    client_name = client_of(ctx)
    name, arguments = visible(client_name, params.name), dict(params.arguments or {})
    # Found as a model's step finds it, by the name the model calls it by (the name its policy goes by).
    found = client_tools(await state.broker.runs.offered(session_id)).get(name)
    if found is None or shown(client_name, name, *found) is None:
        return _unknown(client_name, params.name, name)
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
    # was taken by SessionMcp.handle.
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
            )
        except SwitchboardError as refused:
            return error_result(refused.message)
        if sent.denial is not None:
            return call_result(sent.denial, None)
        try:
            return await outcome(state, session_id, sent.call_id, sent.seq, subscription, ctx)
        except asyncio.CancelledError:
            # An MCP cancel, or the caller gone: no one waits for the call any more. One still waiting
            # for approval is resolved as denied, so no approver is left asked about it.
            with contextlib.suppress(SwitchboardError):
                await asyncio.shield(state.broker.calls.cancel(session_id, sent.call_id, CANCELLED_BY_CLIENT))
            raise
    finally:
        state.hub.unsubscribe(subscription)
