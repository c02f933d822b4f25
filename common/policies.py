"""Which policy an agent's version gives a tool call (docs/agents-and-models.md, Policies): one set of
rules for every door a call comes through, a model's step (the worker) and an MCP client's call (the API),
so neither can be reached around the other. Pure: the caller reads the version's config.

A policy is written as its name, or as an object `{"policy": "require_approval", "approval_timeout_s": N}`
(docs/parked-work.md): an approval nobody decides within N seconds resolves as a deny."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Policy = Literal["allow", "require_approval", "deny"]
POLICIES: frozenset[str] = frozenset(("allow", "require_approval", "deny"))


@dataclass(frozen=True, slots=True)
class Rule:
    """A policy and, for `require_approval`, how long its approval waits (None: for ever)."""

    policy: Policy
    approval_timeout_s: int | None = None


ALLOW = Rule("allow")
REQUIRE_APPROVAL = Rule("require_approval")


def rule_of(entry: Any) -> Rule:
    """A stored policy entry (a name, or the object form) as a Rule; anything else is `require_approval`,
    the safe reading of an entry this release does not know."""
    if isinstance(entry, str):
        return Rule(entry) if entry in POLICIES else REQUIRE_APPROVAL  # type: ignore[arg-type]
    if isinstance(entry, Mapping):
        policy = entry.get("policy")
        if policy not in POLICIES:
            return REQUIRE_APPROVAL
        timeout = entry.get("approval_timeout_s")
        waits = int(timeout) if policy == "require_approval" and isinstance(timeout, int | float) else None
        return Rule(policy, waits)
    return REQUIRE_APPROVAL


def match_rule(policies: Mapping[str, Any], name: str, default: Rule = ALLOW) -> Rule:
    """By name: an exact entry, else the longest `prefix*` pattern (`*` alone is the shortest), else
    `default`."""
    if name in policies:
        return rule_of(policies[name])
    patterns = [p for p in policies if p.endswith("*") and name.startswith(p[:-1])]
    if patterns:
        return rule_of(policies[max(patterns, key=len)])
    return default


def match_policy(policies: Mapping[str, Any], name: str, default: Policy = "allow") -> Policy:
    """The policy alone of `match_rule`."""
    return match_rule(policies, name, Rule(default)).policy


def client_rule(policies: Mapping[str, Any], name: str, annotations: Mapping[str, Any] | None = None) -> Rule:
    """A client tool's, by its model-visible name: an entry of `client_tool_policies` that matches it;
    a tool no entry matches is `require_approval` (waiting for ever) when its annotations say it is
    destructive (MCP's `destructiveHint: true`, and not `readOnlyHint: true`), else `allow`."""
    hints = annotations or {}
    destructive = hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True
    return match_rule(policies, name, REQUIRE_APPROVAL if destructive else ALLOW)


def client_policy(policies: Mapping[str, Any], name: str, annotations: Mapping[str, Any] | None = None) -> Policy:
    """The policy alone of `client_rule`."""
    return client_rule(policies, name, annotations).policy


def denied_text(name: str) -> str:
    """The error result of a call the agent's policy denies, whichever door it came through."""
    return f"the agent's policy denies {name}, so it was not called"
