"""What one model step offers the model, and where each of its calls goes."""

from __future__ import annotations

from broker.services.runs import OfferedClient, PlannedCall, Route, client_tools, parse_client_tool
from common.schema.checks import ArgumentChecks, Unchecked
from workers.config import RunConfig
from workers.mcp.hub import McpTool
from workers.models.base import ModelError, ToolSpec
from workers.tools import Registry

Routed = list[tuple[PlannedCall, Route]]
MCP_TOOL_PREFIX = "mcp__"


def _ms(seconds: int | None) -> int:
    return (seconds or 0) * 1000


class Catalog:
    def __init__(
        self,
        specs: dict[str, ToolSpec],
        routes: dict[str, Route],
        registered: dict[str, str],
        checks: ArgumentChecks,
    ) -> None:
        self._specs = specs
        self._routes = routes
        self._registered = registered
        self._checks = checks
        self._allowance = checks.allowance()

    @property
    def tools(self) -> list[ToolSpec]:
        return list(self._specs.values())

    @classmethod
    def build(
        cls,
        offered: list[OfferedClient],
        registry: Registry,
        config: RunConfig,
        checks: ArgumentChecks,
        mcp_tools: dict[str, list[McpTool]] | None = None,
    ) -> Catalog:
        """Server tools first, then the MCP grants' (`mcp__<grant>__<tool>`, of the grants whose servers
        answered); a run-scoped client tool of the same name replaces one for this run (the first seed's
        rule); registered clients' tools are `client__<name>__<tool>`."""
        specs: dict[str, ToolSpec] = {}
        routes: dict[str, Route] = {}
        for name in config.server_tools:
            server_tool = registry.get(name)
            if server_tool is None:
                raise ModelError(f"the agent offers the server tool {name!r}, which this deployment does not have")
            specs[name] = ToolSpec(name, server_tool.description, server_tool.schema())
            rule = config.server_rule(name)
            routes[name] = Route(
                "server", name, rule.policy, server="builtin", approval_timeout_ms=_ms(rule.approval_timeout_s)
            )
        for grant in config.mcp:
            for mcp_tool in (mcp_tools or {}).get(grant.name, ()):
                visible = f"{MCP_TOOL_PREFIX}{grant.name}__{mcp_tool.name}"
                specs[visible] = ToolSpec(visible, mcp_tool.description, mcp_tool.parameters)
                rule = grant.rule(mcp_tool.name)
                routes[visible] = Route(
                    "server",
                    mcp_tool.name,
                    rule.policy,
                    approval_timeout_ms=_ms(rule.approval_timeout_s),
                    server=grant.name,
                    source=f"mcp:{grant.name}",
                    schema=mcp_tool.parameters,
                )
        for visible, (client, tool) in client_tools(offered).items():
            specs[visible] = ToolSpec(visible, tool.get("description", ""), tool["parameters"])
            rule = config.client_rule(visible, tool.get("annotations"))
            routes[visible] = Route(
                "client",
                tool["name"],
                rule.policy,
                approval_timeout_ms=_ms(rule.approval_timeout_s),
                client_name="" if client.scoped else client.name,
                client_id=client.client_id,
                server=f"client:{client.name}",
                timeout_ms=int(tool.get("timeout_s") or 0) * 1000,
                heartbeat_ms=int(tool.get("heartbeat_s") or 0) * 1000,
                on_leave=str(tool.get("on_leave") or ""),
            )
        registered = {c.name: c.client_id for c in offered if not c.scoped}
        return cls(specs, routes, registered, checks)

    async def routed(self, calls: list[PlannedCall]) -> Routed:
        """Each call with where it goes, checked one after another (their checks share one allowance)."""
        return [(call, await self.route(call)) for call in calls]

    async def route(self, call: PlannedCall) -> Route:
        """Where the call goes; a call whose arguments could not be read, do not satisfy the tool's
        schema, or cannot be checked within the budget, goes nowhere: the model gets an error result
        naming what is wrong."""
        name = call.name
        if call.invalid:
            return Route("none", name, error=f"the arguments of {name} could not be used: {call.invalid}")
        if name in self._routes:
            try:
                problem = await self._checks.problem(self._specs[name].parameters, call.arguments, self._allowance)
            except Unchecked as unchecked:
                return Route("none", name, error=f"the arguments of {name} could not be checked: {unchecked}")
            if problem:
                return Route("none", name, error=f"the arguments of {name} do not match its schema: {problem}")
            return self._routes[name]
        parsed = parse_client_tool(name)
        if parsed is None:
            return Route("none", name, error=f"no tool named {name} is available in this session")
        client, tool = parsed
        # Checked again when the step commits: a registration that appears meanwhile takes the call.
        cid = self._registered.get(client, "")
        if not cid:
            error = f"no client named {client} is registered in this session, so {name} cannot be called"
        else:
            error = f"client {client} does not serve a tool named {tool}"
        return Route("client", tool, client_name=client, client_id=cid, server=f"client:{client}", error=error)
