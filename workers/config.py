"""What a run needs from its agent version's config, read once per step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.services.providers import ProviderFormat
from common.policies import Policy, Rule, client_rule, match_rule, rule_of

DEFAULT_MAX_STEPS = 25
DEFAULT_MCP_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class OAuthAuth:
    """A grant's `auth` of type oauth: what to ask for, and a client registered beforehand."""

    scopes: tuple[str, ...] = ()
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class McpGrant:
    """An MCP server the agent's version grants (docs/mcp.md): its tools are `mcp__<name>__<tool>`."""

    name: str
    url: str
    default_policy: Policy
    policies: dict[str, Rule] = field(default_factory=dict)
    timeout_s: float = DEFAULT_MCP_TIMEOUT_S
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    # The default policy's approval deadline, when it is given as an object (None: an approval waits for ever).
    default_approval_timeout_s: int | None = None
    # Set for a grant whose server wants each person's sign-in: its tokens are the session owner's.
    oauth: OAuthAuth | None = None

    def rule(self, tool: str) -> Rule:
        """By the MCP tool's own name: the grant's entry for it, else its default."""
        return self.policies.get(tool) or Rule(self.default_policy, self.default_approval_timeout_s)

    def policy(self, tool: str) -> Policy:
        return self.rule(tool).policy

    @classmethod
    def of(cls, grant: dict[str, Any], secrets: dict[str, Any]) -> McpGrant:
        default = rule_of(grant["default_policy"])
        return cls(
            name=grant["name"],
            url=grant["url"],
            default_policy=default.policy,
            default_approval_timeout_s=default.approval_timeout_s,
            # A tool entry's approval_timeout_s sits beside its policy: the entry is the object form.
            policies={rule["name"]: rule_of(rule) for rule in grant.get("tools") or ()},
            timeout_s=float(grant.get("timeout_s") or DEFAULT_MCP_TIMEOUT_S),
            headers=dict((secrets.get(grant["name"]) or {}).get("headers") or {}),
            oauth=_oauth(grant.get("auth"), secrets.get(grant["name"]) or {}),
        )


def _oauth(auth: dict[str, Any] | None, secrets: dict[str, Any]) -> OAuthAuth | None:
    if not auth or auth.get("type") != "oauth":
        return None
    return OAuthAuth(tuple(auth.get("scopes") or ()), auth.get("client_id"), secrets.get("oauth_client_secret"))


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
    # Each entry a policy's name or its object form (common/policies.py rule_of).
    client_policies: dict[str, Any] = field(default_factory=dict)
    server_policies: dict[str, Any] = field(default_factory=dict)
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

    def client_rule(self, name: str, annotations: dict[str, Any] | None = None) -> Rule:
        """By the model-visible name (common/policies.py, the rules the session MCP endpoint applies too)."""
        return client_rule(self.client_policies, name, annotations)

    def client_policy(self, name: str, annotations: dict[str, Any] | None = None) -> Policy:
        return self.client_rule(name, annotations).policy

    def server_rule(self, name: str) -> Rule:
        return match_rule(self.server_policies, name)

    def server_policy(self, name: str) -> Policy:
        return self.server_rule(name).policy
