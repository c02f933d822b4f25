"""A worker's settings (`switchboard worker`): the broker's, what both processes have, and its own: the
platform providers' keys and URLs, steps, retries, the bounds of a model's stream, jobs, MCP call limits,
its lease among the workers and its metrics port. The model providers' keys are here and nowhere else:
the API never reads them (it lists the platform providers the live workers offer,
broker/services/providers.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator

from broker.settings import BrokerSettings
from common.settings import ProcessSettings, Seconds


class WorkerSettings(BrokerSettings, ProcessSettings):
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
    # How often a worker reads every partition it keeps again, whatever its alarms said: the last guarantee
    # behind alarms rung on pub/sub. A subscription made again (by redis-py under the read, or by the
    # keeper after an error) is read again at once, so this bounds only a message lost some other way.
    rescan_interval_s: Seconds = 300.0
    worker_max_jobs: int = Field(default=50, ge=1)
    # A call of an agent's MCP server holds no job slot once begun (a slow server would otherwise hold
    # the capacity other sessions' steps need): it runs beside the jobs, at most this many at once per
    # server (a grant's URL and credentials) on one worker, the others waiting for their turn within
    # their own timeout_s; and this many in all, running or waiting (past it a call's result says so).
    mcp_calls_per_grant: int = Field(default=16, ge=1)
    mcp_calls_per_worker: int = Field(default=256, ge=1)
    worker_transcript_cache_mb: int = Field(default=64, ge=0)
    # A conversation no step read for this long leaves the cache (the session's next step reads it from
    # the log again): a run parked for days must not keep its conversation in every worker that ran it.
    worker_transcript_idle_s: Seconds = 60.0
    # The worker's /metrics port (0: none; the API serves its own on its port).
    worker_metrics_port: int = Field(default=9101, ge=0, le=65535)
    # Webhooks: the waits between a delivery's attempts (seconds, decimals allowed): a delivery has at
    # most one attempt more than this has entries; each attempt gets `webhook_timeout_s`; one worker
    # sends at most `webhook_concurrency` at once, of every endpoint.
    webhook_retry_schedule_s: str = "5,300,1800,7200,18000,36000,36000"
    webhook_timeout_s: Annotated[float, Field(gt=0, le=60)] = 10.0
    webhook_concurrency: int = Field(default=64, ge=1, le=4096)

    @field_validator("webhook_retry_schedule_s")
    @classmethod
    def _schedule(cls, value: str) -> str:
        retry_delays(value)
        return value

    @property
    def webhook_retry_delays(self) -> tuple[float, ...]:
        return retry_delays(self.webhook_retry_schedule_s)


# A schedule past this many entries, or a wait past a week, is a typo.
_MOST_RETRIES = 50
_LONGEST_WAIT_S = 604_800.0


def retry_delays(text: str) -> tuple[float, ...]:
    """The waits of SWITCHBOARD_WEBHOOK_RETRY_SCHEDULE_S: comma-separated seconds (decimals allowed, none
    negative; empty: no retry)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if len(parts) > _MOST_RETRIES:
        raise ValueError(f"at most {_MOST_RETRIES} waits, not {len(parts)}")
    delays = []
    for part in parts:
        try:
            delay = float(part)
        except ValueError:
            raise ValueError(f"{part!r} is not a number of seconds") from None
        if not 0 <= delay <= _LONGEST_WAIT_S:
            raise ValueError(f"{part}: each wait is 0 to {_LONGEST_WAIT_S:g} seconds")
        delays.append(delay)
    return tuple(delays)
