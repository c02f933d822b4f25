"""The broker's settings: what the broker itself reads (broker/core.py, broker/services/), in every
process that opens one: Redis, the key prefix, deadlines, retention, storage, leases, idempotency,
provider address rules, the cloud identity rule, schema checks. `switchboard keys mint` reads these alone.

The API's settings extend them in `api/settings.py`, a worker's in `workers/settings.py`; the command line
composes the roles (`switchboard/settings.py`). docs/configuration.md lists each field once.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from pydantic_settings import BaseSettings

from common.settings import SETTINGS_CONFIG, Seconds

# The longest SWITCHBOARD_MAX_WAIT_S may be (a year): the bound the request schemas state; the setting
# itself is what a request is held to (api/schemas/waits.py).
MAX_WAIT_CEILING_S = 31_536_000


class BrokerSettings(BaseSettings):
    """What the broker reads: every process that opens one has these (`Core.settings`)."""

    model_config = SETTINGS_CONFIG

    redis_url: str | None = None
    # Tuning that the tests and benchmarks turn.
    key_prefix: str = Field(default="sb", pattern=r"^[A-Za-z0-9_.-]{1,32}$")
    redis_max_connections: int = Field(default=16, ge=4)

    ack_timeout_s: Seconds = 60.0
    result_timeout_s: Seconds = 300.0
    session_token_ttl_s: Seconds = 86400.0
    idempotency_ttl_s: Seconds = 604800.0
    idempotency_wait_s: Seconds = 30.0
    # A session with no activity for this long is purged with every key it owns (0: kept for ever).
    session_retention_s: float = Field(default=2_592_000.0, ge=0)
    # A settled call's record (and its call stream entry) is dropped this long after it settled, so a
    # long-lived session's memory does not grow with every call it ever made; the event log keeps the
    # call's events for as long as the session lives (0: records kept as long as their session).
    settled_call_retention_s: float = Field(default=86_400.0, ge=0)
    # Everything one session keeps in Redis (log, call records, registrations, queued input, receipts)
    # counts toward this; a write that would pass it is refused (409), a run whose own output would
    # ends with run_failed (0: no bound). One session token must not be able to fill Redis.
    max_session_bytes: int = Field(default=67_108_864, ge=0)
    # The longest a tool call or an approval may wait: a client tool's timeout_s and heartbeat_s, an MCP
    # grant's timeout_s, a policy's approval_timeout_s (docs/parked-work.md). Past it a request is 400.
    max_wait_s: int = Field(default=2_592_000, ge=1, le=MAX_WAIT_CEILING_S)
    step_lease_s: Seconds = 10.0
    server_call_lease_s: Seconds = 6.0
    # A call handed to a pool member that has not acked it within this long goes to another member.
    pool_claim_s: Seconds = 10.0

    # A workspace's own providers (BYOK) may be on loopback, private or link-local addresses only when
    # this is true (self-hosted models on a private network); otherwise anyone holding a key that may
    # manage providers could point the worker at the machine's or the network's own services. Cloud
    # metadata addresses are refused either way (common/addresses.py); the platform URLs are exempt.
    # The API checks an address when it is stored, the worker on every connection.
    provider_allow_private: bool = False
    # How long resolving a provider's host name may take, when it is created or moved and on connecting.
    provider_resolve_timeout_s: Annotated[float, Field(gt=0, le=60)] = 5.0
    # A cloud provider (docs/providers/clouds.md) may use the worker's own cloud identity (boto's default
    # chain, google.auth.default, AZURE_OPENAI_API_KEY) instead of credentials of its own only when this is
    # true: otherwise anyone holding a key that may manage providers would spend the operator's cloud
    # account. The API refuses such a provider when this is off, and so does the worker.
    cloud_environment_credentials: bool = False
    # What checking one call's arguments against its tool's schema may cost (common/schema/): steps (a
    # keyword applied to a value, more for references and long texts) and time, whichever runs out
    # first; past either the call gets an error result saying so. A check of 1,000 rows of five fields
    # takes about 30,000 steps. A worker's steps check arguments, and the API an approver's edits.
    schema_check_steps: int = Field(default=200_000, ge=1_000)
    schema_check_timeout_s: Annotated[float, Field(gt=0, le=60)] = 1.0

    # Webhooks: deliveries kept per endpoint (its log is trimmed to this, oldest first), and how many of
    # one endpoint's deliveries are in flight at once across the workers (a slow endpoint holds only
    # its own share).
    webhook_log_size: int = Field(default=1_000, ge=10, le=100_000)
    webhook_endpoint_concurrency: int = Field(default=8, ge=1, le=256)

    @property
    def ack_timeout_ms(self) -> int:
        return round(self.ack_timeout_s * 1000)

    @property
    def result_timeout_ms(self) -> int:
        return round(self.result_timeout_s * 1000)

    @property
    def step_lease_ms(self) -> int:
        return round(self.step_lease_s * 1000)

    @property
    def server_call_lease_ms(self) -> int:
        return round(self.server_call_lease_s * 1000)

    @property
    def session_retention_ms(self) -> int:
        return round(self.session_retention_s * 1000)

    @property
    def settled_call_retention_ms(self) -> int:
        return round(self.settled_call_retention_s * 1000)

    @property
    def session_token_ttl_ms(self) -> int:
        return round(self.session_token_ttl_s * 1000)

    @property
    def idempotency_ttl_ms(self) -> int:
        return round(self.idempotency_ttl_s * 1000)
