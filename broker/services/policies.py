"""The tool policies a session is held to: its agent version's `client_tool_policies`, which the front
doors that call a session's tools without a model (the session MCP endpoint) apply as a step does."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.services.agents import Agents

# Versions whose policies are kept, most recently used first. A version never changes, so a kept entry
# is never stale; the bound is on memory: a version holds at most 256 entries of at most 128 characters
# (api/schemas/agents.py), some 60 KiB, so this holds about 15 MiB at worst (a few KiB as agents are).
MAX_VERSIONS = 256


class SessionPolicies:
    def __init__(self, core: Core, agents: Agents) -> None:
        self._core = core
        self._agents = agents
        self._versions: OrderedDict[str, Mapping[str, Any]] = OrderedDict()

    async def client_policies(self, session_id: str) -> Mapping[str, Any]:
        """The `client_tool_policies` of the session's agent version (the one the session was created
        on), each a policy's name or its object form (common/policies.py rule_of). NotFound when the
        session or its version is gone: a caller refuses the call then."""
        with translate_redis_errors():
            found = await self._core.redis.hget(self._core.keys.session(session_id).meta, "agent_version_id")
        if found is None:
            raise NotFound(f"no session {session_id}")
        version_id = found.decode()
        policies = self._versions.get(version_id)
        if policies is None:
            version = await self._agents.version(version_id)
            policies = dict(version.config.get("client_tool_policies") or {})
            self._versions[version_id] = policies
            while len(self._versions) > MAX_VERSIONS:
                self._versions.popitem(last=False)
        else:
            self._versions.move_to_end(version_id)
        return policies
