"""The broker facade: every service over one `Core`, opened once per process."""

from __future__ import annotations

from broker.addresses import ProviderAddresses, Resolver
from broker.agents import Agents
from broker.approvals import Approvals
from broker.calls import Calls
from broker.clients import Clients
from broker.core import Core
from broker.credentials import Credentials
from broker.idempotency import Idempotency
from broker.keepers import Keepers
from broker.log import EventLog
from broker.pools import Pools
from broker.providers import Providers
from broker.retention import Retention
from broker.runs import Runs
from broker.schema.checks import ArgumentChecks
from broker.server_calls import ServerCalls
from broker.sessions import Sessions
from broker.settings import Settings
from broker.timers import Timers
from broker.work import Work


class Broker:
    """Everything above Redis goes through one of these services."""

    def __init__(self, core: Core, *, resolver: Resolver | None = None) -> None:
        self.core = core
        self.credentials = Credentials(core)
        self.agents = Agents(core)
        settings = core.settings
        addresses = ProviderAddresses(
            allow_private=settings.provider_allow_private,
            timeout_s=settings.provider_resolve_timeout_s,
            resolver=resolver,
        )
        self.providers = Providers(core, addresses)
        self.sessions = Sessions(core)
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
        self.server_calls = ServerCalls(core)
        self.pools = Pools(core)
        self.keepers = Keepers(core)
        self.retention = Retention(core)

    @classmethod
    async def connect(
        cls, settings: Settings, url: str, role: str = "switchboard", *, resolver: Resolver | None = None
    ) -> Broker:
        """`resolver` answers for provider host names (the system's when None; tests bring their own)."""
        return cls(await Core.connect(settings, url, role), resolver=resolver)

    @property
    def settings(self) -> Settings:
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

    async def close(self) -> None:
        await self.arguments.close()
        await self.core.close()
