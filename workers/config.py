"""What a run needs from its agent version's config, read once per step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.services.providers import ProviderFormat
from common.policies import Policy, client_policy, match_policy

DEFAULT_MAX_STEPS = 25
DEFAULT_MCP_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class McpGrant:
    """An MCP server the agent's version grants (docs/mcp.md): its tools are `mcp__<name>__<tool>`."""

    name: str
    url: str
    default_policy: Policy
    policies: dict[str, Policy] = field(default_factory=dict)
    timeout_s: float = DEFAULT_MCP_TIMEOUT_S
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    def policy(self, tool: str) -> Policy:
        """By the MCP tool's own name: the grant's entry for it, else its default."""
        return self.policies.get(tool, self.default_policy)

    @classmethod
    def of(cls, grant: dict[str, Any], secrets: dict[str, Any]) -> McpGrant:
        return cls(
            name=grant["name"],
            url=grant["url"],
            default_policy=grant["default_policy"],
            policies={rule["name"]: rule["policy"] for rule in grant.get("tools") or ()},
            timeout_s=float(grant.get("timeout_s") or DEFAULT_MCP_TIMEOUT_S),
            headers=dict((secrets.get(grant["name"]) or {}).get("headers") or {}),
        )


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The model settings and the tool rules of an agent version (docs/agents-and-models.md)."""

    format: ProviderFormat
    model: str
    max_tokens: int
    system_prompt: str | None = None
    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    tool_choice: str | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    server_tools: tuple[str, ...] = ()
    client_policies: dict[str, Policy] = field(default_factory=dict)
    server_policies: dict[str, Policy] = field(default_factory=dict)
    mcp: tuple[McpGrant, ...] = ()

    @classmethod
    def of(
        cls, config: dict[str, Any], default_max_steps: int = DEFAULT_MAX_STEPS, secrets: dict[str, Any] | None = None
    ) -> RunConfig:
        model = config["model"]
        thinking = model.get("thinking") or {}
        return cls(
            format=model["format"],
            model=model["model"],
            max_tokens=int(model["max_tokens"]),
            system_prompt=config.get("system_prompt"),
            thinking_budget=thinking.get("budget_tokens"),
            reasoning_effort=model.get("reasoning_effort"),
            tool_choice=model.get("tool_choice"),
            max_steps=int(config.get("max_steps") or default_max_steps),
            server_tools=tuple(config.get("server_tools") or ()),
            client_policies=dict(config.get("client_tool_policies") or {}),
            server_policies=dict(config.get("server_tool_policies") or {}),
            mcp=tuple(McpGrant.of(grant, secrets or {}) for grant in config.get("mcp") or ()),
        )

    def grant(self, name: str) -> McpGrant | None:
        return next((grant for grant in self.mcp if grant.name == name), None)

    def client_policy(self, name: str, annotations: dict[str, Any] | None = None) -> Policy:
        """By the model-visible name (common/policies.py, the rules the session MCP endpoint applies too)."""
        return client_policy(self.client_policies, name, annotations)

    def server_policy(self, name: str) -> Policy:
        return match_policy(self.server_policies, name)
