"""Which policy an agent's version gives a tool call (docs/agents-and-models.md, Policies): one set of
rules for every door a call comes through, a model's step (the worker) and an MCP client's call (the API),
so neither can be reached around the other. Pure: the caller reads the version's config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

Policy = Literal["allow", "require_approval", "deny"]


def match_policy(policies: Mapping[str, Policy], name: str, default: Policy = "allow") -> Policy:
    """By name: an exact entry, else the longest `prefix*` pattern (`*` alone is the shortest), else
    `default`."""
    if name in policies:
        return policies[name]
    patterns = [p for p in policies if p.endswith("*") and name.startswith(p[:-1])]
    if patterns:
        return policies[max(patterns, key=len)]
    return default


def client_policy(policies: Mapping[str, Policy], name: str, annotations: Mapping[str, Any] | None = None) -> Policy:
    """A client tool's, by its model-visible name: an entry of `client_tool_policies` that matches it;
    a tool no entry matches is `require_approval` when its annotations say it is destructive (MCP's
    `destructiveHint: true`, and not `readOnlyHint: true`), else `allow`."""
    hints = annotations or {}
    destructive = hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True
    return match_policy(policies, name, "require_approval" if destructive else "allow")


def denied_text(name: str) -> str:
    """The error result of a call the agent's policy denies, whichever door it came through."""
    return f"the agent's policy denies {name}, so it was not called"
