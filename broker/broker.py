"""The broker facade: every service over one `Core`, opened once per process."""

from __future__ import annotations

import time
from typing import Generic

from broker.core import Core, R, S
from broker.services.agents import Agents
from broker.services.alarms import Alarms
from broker.services.approvals import Approvals
from broker.services.calls import Calls
from broker.services.clients import Clients
from broker.services.credentials import Credentials
from broker.services.deliveries import Deliveries
from broker.services.idempotency import Idempotency
from broker.services.inbox import Inbox
from broker.services.inputs import Inputs
from broker.services.keepers import Keepers
from broker.services.live import LiveHub
from broker.services.log import EventLog
from broker.services.mcp_authorizations import McpAuthorizations
from broker.services.mcp_challenges import McpChallenges
from broker.services.mcp_connections import McpConnections
from broker.services.policies import SessionPolicies
from broker.services.pools import Pools
from broker.services.providers import Providers
from broker.services.retention import Retention
from broker.services.runs import Runs
from broker.services.schedules import Schedules
from broker.services.server_calls import ServerCalls
from broker.services.sessions import Sessions
from broker.services.telemetry import Figures, read_figures
from broker.services.timers import Timers
from broker.services.traces import Traces
from broker.services.webhooks import Webhooks
from broker.services.work import Work
from common.addresses import ProviderAddresses, Resolver
from common.schema.checks import ArgumentChecks


class Broker(Generic[S]):
    """Everything above Redis goes through one of these services. `Broker[ApiSettings]` in the API,
    `Broker[WorkerSettings]` in a worker: `settings` is the process's role (api/settings.py,
    workers/settings.py)."""

    def __init__(self, core: Core[S], *, resolver: Resolver | None = None) -> None:
        self.core = core
        self.credentials = Credentials(core)
        self.agents = Agents(core)
        self.policies = SessionPolicies(core, self.agents)
        settings = core.settings
        addresses = ProviderAddresses(
            allow_private=settings.provider_allow_private,
            timeout_s=settings.provider_resolve_timeout_s,
            resolver=resolver,
        )
        self.providers = Providers(core, addresses)
        self.inbox = Inbox(core)
        self.sessions = Sessions(core, self.inbox)
        self.clients = Clients(core)
        self.runs = Runs(core)
        self.timers = Timers(core)
        self.log = EventLog(core)
        self.idempotency = Idempotency(core)
        self.work = Work(core)
        # Tools' arguments held against their schemas (a worker's steps, an approver's edits).
        self.arguments = ArgumentChecks(core.settings.schema_check_steps, core.settings.schema_check_timeout_s)
        self.approvals = Approvals(core, self.arguments)
        self.calls = Calls(core)
        self.traces = Traces(core)
        self.inputs = Inputs(core)
        self.server_calls = ServerCalls(core)
        self.pools = Pools(core)
        self.keepers = Keepers(core)
        self.alarms = Alarms(core)
        self.retention = Retention(core)
        self.schedules = Schedules(core)
        self.webhooks = Webhooks(core, addresses)
        self.deliveries = Deliveries(core)
        self.mcp_connections = McpConnections(core)
        self.mcp_challenges = McpChallenges(core)
        self.mcp_authorizations = McpAuthorizations(core)

    @classmethod
    async def connect(
        cls, settings: R, url: str, role: str = "switchboard", *, resolver: Resolver | None = None
    ) -> Broker[R]:
        """`resolver` answers for provider host names (the system's when None; tests bring their own)."""
        return Broker(await Core.connect(settings, url, role), resolver=resolver)

    @property
    def settings(self) -> S:
        return self.core.settings

    @property
    def workspace_id(self) -> str:
        return self.core.workspace_id

    async def ready(self) -> bool:
        """Redis answers and every script is loaded."""
        try:
            return bool(await self.core.redis.ping()) and await self.core.scripts.loaded()
        except Exception:
            return False

    def live_hub(self, *, keepalive_s: float) -> LiveHub:
        """The process's live hub: one pub/sub connection for every session's live channel (start it)."""
        keys = self.core.keys
        return LiveHub(
            self.core.pubsub,
            keys.hub_control,
            lambda session_id: keys.session(session_id).live,
            keepalive_s=keepalive_s,
        )

    async def round_trip(self) -> float:
        """The time (s) one PING to Redis takes to come back; raises when Redis does not answer."""
        started = time.perf_counter()
        await self.core.redis.ping()
        return time.perf_counter() - started

    async def figures(self) -> Figures:
        """The deployment's figures, summed over every partition (`/metrics/cluster`)."""
        return await read_figures(self.core)

    def node_of(self, partition: int) -> str:
        """The address of the Redis node serving `partition` as last read ('' for one Redis; 'unserved'
        when no node serves its slot): what a worker backs off by."""
        return self.core.node_of(partition)

    async def close(self) -> None:
        await self.arguments.close()
        await self.core.close()
