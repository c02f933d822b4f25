"""The broker facade: every service over one `Core`, opened once per process."""

from __future__ import annotations

from broker.core import Core
from broker.services.agents import Agents
from broker.services.approvals import Approvals
from broker.services.calls import Calls
from broker.services.clients import Clients
from broker.services.credentials import Credentials
from broker.services.idempotency import Idempotency
from broker.services.keepers import Keepers
from broker.services.log import EventLog
from broker.services.pools import Pools
from broker.services.providers import Providers
from broker.services.retention import Retention
from broker.services.runs import Runs
from broker.services.server_calls import ServerCalls
from broker.services.sessions import Sessions
from broker.services.timers import Timers
from broker.services.work import Work
from broker.settings import Settings
from common.addresses import ProviderAddresses, Resolver
from common.schema.checks import ArgumentChecks


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
