"""Deployment settings, read once from the environment (prefix `SWITCHBOARD_`) and passed down.

Each process reads only what its role needs, so no process holds a secret another role is for:

- `BrokerSettings`: what the broker itself reads (broker/core.py, broker/services/): Redis, the key
  prefix, deadlines, retention, storage, leases, idempotency, provider address rules, the cloud identity
  rule, schema checks.
  `switchboard keys mint` reads these alone.
- `ProcessSettings`: those, and what both long-running processes have (bind address, logs, Redis probe).
- `ApiSettings`: the API process (`switchboard api`): its port, bootstrap key, limits, proxies, streams.
- `WorkerSettings`: a worker (`switchboard worker`): the model providers' keys and URLs, steps, retries,
  the bounds of a model's stream, jobs, its metrics port, its lease among the workers. The API never
  reads these, the keys least of all: it lists the platform providers the live workers offer
  (broker/services/providers.py).
- `LocalSettings`: where `switchboard up` keeps its embedded Redis and development key.
- `Settings`: all of them, for `switchboard up` and the rest of the command line; `up` hands each child
  process the variables of its own role (switchboard/up.py). docs/configuration.md lists each field once.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.jsonlog import LogFormat

Seconds = Annotated[float, Field(gt=0)]


class BrokerSettings(BaseSettings):
    """What the broker reads: every process that opens one has these (`Core.settings`)."""

    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_", extra="ignore", frozen=True)

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


class ProcessSettings(BrokerSettings):
    """What the API and a worker both have besides the broker's."""

    # The API's bind address; a worker serves /metrics on it.
    host: str = "127.0.0.1"
    # Operations: log lines as JSON objects (or text for a terminal); how often each process times a
    # PING to Redis.
    log_format: LogFormat = "json"
    redis_probe_s: Seconds = 5.0


class ApiSettings(ProcessSettings):
    """The API process's: no model provider's key or URL among them."""

    port: int = Field(default=8000, ge=0, le=65535)
    bootstrap_api_key: SecretStr | None = None
    access_log: bool = False
    fast_lane: bool = True
    # The largest request body accepted (413 beyond): 64 tools with big schemas, or a 65,536-character
    # result escaped to JSON, fit with room to spare.
    max_body_bytes: int = Field(default=1_048_576, ge=65_536)
    # A client's result may carry images (5 MiB decoded in all, a third more as base64): its own limit.
    max_result_body_bytes: int = Field(default=8_388_608, ge=65_536)
    # Per API process (api/rate_limit.py): requests a second per credential and the burst it may make
    # at once (0: no limit); 401s from one address within the window before its failures are braked
    # (a valid credential from that address is still served).
    rate_limit_per_s: float = Field(default=200.0, ge=0)
    rate_limit_burst: int = Field(default=400, ge=1)
    auth_failure_limit: int = Field(default=20, ge=0)
    auth_failure_window_s: Seconds = 60.0
    # The proxies (IPs or CIDRs, comma-separated) whose X-Forwarded-For and X-Forwarded-Proto are
    # believed (api/proxies.py). Empty trusts nobody: anyone could otherwise claim any address and
    # dodge the per-address brake, or claim https and pass the same-origin check.
    trusted_proxies: str = ""
    # A connection that has not sent a request's whole header block this long after it opened (or after
    # the request's first byte) is closed (api/header_deadline.py): a slow sender holds no connection.
    header_timeout_s: Seconds = 10.0
    stream_keepalive_s: Seconds = 15.0
    # Event streams (and pool call streams) one session, and one credential, may hold open on one API
    # process; past it 429. 0: no cap.
    max_streams_per_session: int = Field(default=64, ge=0)
    max_streams_per_credential: int = Field(default=1_000, ge=0)
    stream_retry_ms: int = Field(default=3000, ge=0)
    # Streams ended by a shutdown are told to come back within this many ms (each a random share of it,
    # so the clients of a replica going away do not all land on the others in the same instant).
    drain_retry_ms: int = Field(default=1000, ge=1)
    # After SIGTERM the API keeps serving this long with readiness failing and connections closed after
    # each response (api/server.py), then stops listening; 0 stops listening at once.
    drain_grace_s: float = Field(default=2.0, ge=0)
    # Named in every /readyz answer when set: `switchboard up` sets a fresh one, so an API of another
    # `up` (or anything else) answering on the port is never taken for the one it started.
    instance_id: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")

    @field_validator("bootstrap_api_key")
    @classmethod
    def _bootstrap_key_shape(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _is_api_key(value.get_secret_value()):
            raise ValueError("must look like swb_ak_ followed by at least 32 url-safe characters")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: str) -> str:
        for item in _items(value):
            try:
                ipaddress.ip_network(item)
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or a CIDR network (host bits zero)") from None
        return value

    @property
    def trusted_proxy_list(self) -> list[str]:
        """`trusted_proxies` as its items."""
        return _items(self.trusted_proxies)

    @property
    def local_api_url(self) -> str:
        """The API's URL from this machine (a wildcard bind address reached on the loopback)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host  # noqa: S104 (read, not bound)
        return f"http://{host}:{self.port}"


class WorkerSettings(ProcessSettings):
    """A worker's: the model providers' keys are here and nowhere else."""

    # The platform providers (the deployment's own keys): a worker holding one offers its provider, and
    # the API lists what the live workers offer (broker/services/providers.py).
    openai_api_key: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    openai_base_url: str = "https://api.openai.com/v1"
    anthropic_base_url: str = "https://api.anthropic.com"
    server_tools_module: str | None = None
    max_steps: int = Field(default=25, ge=1, le=1000)
    model_attempts: int = Field(default=4, ge=1, le=20)
    model_backoff_s: Seconds = 0.5
    model_retry_budget_s: Seconds = 60.0
    step_timeout_s: Seconds = 120.0
    # What one step's model stream may carry, counted as it arrives (workers/models/bounds.py): UTF-8 bytes
    # of text and reasoning (and, apart, of all its calls' arguments), bytes of one call's arguments,
    # fragments of any kind, tool calls. A provider's server may be hostile; past a bound the step stops
    # with run_failed, never after buffering what it sent.
    model_max_text_bytes: int = Field(default=8_388_608, ge=1_024, le=67_108_864)
    model_max_argument_bytes: int = Field(default=1_048_576, ge=1_024, le=16_777_216)
    model_max_fragments: int = Field(default=20_000, ge=100, le=1_000_000)
    # Each call of a step is a block, a call record, a dispatch and an event, all written by the one
    # script that commits the step, which holds Redis for every session while it runs.
    model_max_calls: int = Field(default=128, ge=1, le=1_024)
    # A worker that stops renewing its place among the live workers for this long loses its partitions
    # (their timers and work) to the others.
    keeper_lease_s: Seconds = 5.0
    # How often a worker reads every partition it keeps again, whatever its alarms said: the guarantee
    # behind alarms rung on pub/sub (a message lost with a dropped connection is caught by then).
    rescan_interval_s: Seconds = 30.0
    worker_max_jobs: int = Field(default=50, ge=1)
    # A call of an agent's MCP server holds no job slot once begun (a slow server would otherwise hold
    # the capacity other sessions' steps need): it runs beside the jobs, at most this many at once per
    # server (a grant's URL and credentials) on one worker, the others waiting for their turn within
    # their own timeout_s; and this many in all, running or waiting (past it a call's result says so).
    mcp_calls_per_grant: int = Field(default=16, ge=1)
    mcp_calls_per_worker: int = Field(default=256, ge=1)
    worker_transcript_cache_mb: int = Field(default=64, ge=0)
    # The worker's /metrics port (0: none; the API serves its own on its port).
    worker_metrics_port: int = Field(default=9101, ge=0, le=65535)


class LocalSettings(BrokerSettings):
    """What only `switchboard up` (and `session new`, which finds its development key) reads."""

    data_dir: Path = Path("./.switchboard")

    @property
    def dev_key_path(self) -> Path:
        """Where `switchboard up` keeps its development API key."""
        return self.data_dir / "dev-api-key"


class Settings(ApiSettings, WorkerSettings, LocalSettings):
    """Every knob of a Switchboard deployment, the union of the roles: `switchboard up` (which starts the
    API and a worker, each handed the variables of its own role) and the command line.
    docs/configuration.md lists each field with its default."""


def env_names(role: type[BrokerSettings]) -> frozenset[str]:
    """The environment variables `role` reads (`SWITCHBOARD_<FIELD>`)."""
    prefix = role.model_config.get("env_prefix", "")
    return frozenset(f"{prefix}{name}".upper() for name in role.model_fields)


API_KEY_PREFIX = "swb_ak_"
SESSION_TOKEN_PREFIX = "swb_st_"  # noqa: S105 (a marker, not a secret)
_URL_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _is_api_key(value: str) -> bool:
    secret = value.removeprefix(API_KEY_PREFIX)
    return value.startswith(API_KEY_PREFIX) and len(secret) >= 32 and set(secret) <= _URL_SAFE


def _items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]
