"""How long a request may make anything wait: SWITCHBOARD_MAX_WAIT_S (docs/parked-work.md).

The request schemas bound each wait by the most that setting may be (a year); a deployment's own
setting is checked here, after parsing, against the settings of the process answering: 400 naming the
field, its value and the limit, before anything is written."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from api.schemas.agents import McpGrantBody, PolicyBody, PolicyValue, PublishAgentVersionBody, ToolRuleBody
from api.schemas.clients import ClientToolBody
from broker.errors import InvalidRequest

SETTING = "SWITCHBOARD_MAX_WAIT_S"


def _check(field: str, value: int | None, limit_s: int) -> None:
    if value is not None and value > limit_s:
        raise InvalidRequest(f"{field}: {value:,} s is past this deployment's limit of {limit_s:,} s ({SETTING})")


def check_tools(field: str, tools: Sequence[ClientToolBody] | None, limit_s: int) -> None:
    """A client tool's `timeout_s` and `heartbeat_s`, each at most the limit."""
    for index, tool in enumerate(tools or ()):
        _check(f"{field}[{index}].timeout_s", tool.timeout_s, limit_s)
        _check(f"{field}[{index}].heartbeat_s", tool.heartbeat_s, limit_s)


def _check_policies(field: str, policies: Mapping[str, PolicyValue] | None, limit_s: int) -> None:
    for name, value in (policies or {}).items():
        if isinstance(value, PolicyBody):
            _check(f"{field}.{name}.approval_timeout_s", value.approval_timeout_s, limit_s)


def _check_rules(field: str, rules: Iterable[ToolRuleBody] | None, limit_s: int) -> None:
    for index, rule in enumerate(rules or ()):
        _check(f"{field}[{index}].approval_timeout_s", rule.approval_timeout_s, limit_s)


def _check_grant(field: str, grant: McpGrantBody, limit_s: int) -> None:
    _check(f"{field}.timeout_s", grant.timeout_s, limit_s)
    if isinstance(grant.default_policy, PolicyBody):
        _check(f"{field}.default_policy.approval_timeout_s", grant.default_policy.approval_timeout_s, limit_s)
    _check_rules(f"{field}.tools", grant.tools, limit_s)


def check_version(body: PublishAgentVersionBody, limit_s: int) -> None:
    """Every approval deadline of an agent version (its policies, its grants' default policies and tool
    entries) and every MCP grant's call timeout, each at most the limit."""
    _check_policies("client_tool_policies", body.client_tool_policies, limit_s)
    _check_policies("server_tool_policies", body.server_tool_policies, limit_s)
    for index, grant in enumerate(body.mcp or ()):
        _check_grant(f"mcp[{index}]", grant, limit_s)
    for index, sandbox in enumerate(body.sandboxes or ()):
        _check_rules(f"sandboxes[{index}].tools", sandbox.tools, limit_s)
