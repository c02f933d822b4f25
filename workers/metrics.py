"""Prometheus metrics of one worker process, served on `SWITCHBOARD_WORKER_METRICS_PORT`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, start_http_server

from broker.services.telemetry import probe_redis, redis_rtt_histogram
from workers.settings import WorkerSettings

logger = logging.getLogger(__name__)

# The token counter's bounds: its (provider, model, agent) label sets, and a model name's length in one.
TOKEN_SERIES = 1000
MODEL_LABEL_LIMIT = 128

OUTCOMES = ("ok", "error")
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.steps = Histogram(
            "switchboard_step_seconds", "One model step, job start to end, by outcome (ok, error)", ["outcome"],
            buckets=STEP_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.tools = Histogram(
            "switchboard_server_tool_seconds", "One server tool job, start to end, by outcome", ["outcome"],
            buckets=STEP_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.mcp_failures = Counter(
            "switchboard_mcp_server_failures", "An agent's MCP server that a step could not use (left out)",
            registry=self.registry,
        )  # fmt: skip
        self.mcp_notifications_dropped = Counter(
            "switchboard_mcp_notifications_dropped", "Notifications (and requests) from agents' MCP servers past"
            " the rate one connection reads, dropped", registry=self.registry,
        )  # fmt: skip
        self.mcp_calls = Gauge(
            "switchboard_mcp_calls", "Calls of agents' MCP servers this worker holds, by state (running, waiting"
            " for their server's bound)", ["state"], registry=self.registry,
        )  # fmt: skip
        self.mcp_calls_refused = Counter(
            "switchboard_mcp_calls_refused", "MCP calls refused: the worker held SWITCHBOARD_MCP_CALLS_PER_WORKER"
            " already", registry=self.registry,
        )  # fmt: skip
        self.model_tokens = Counter(
            "switchboard_model_tokens", "Tokens model steps used, as the provider counted them, by kind (input,"
            " output, cached_input, reasoning), provider id, model and agent id",
            ["kind", "provider", "model", "agent"], registry=self.registry,
        )  # fmt: skip
        self._token_labels: set[tuple[str, str, str]] = set()
        self.webhook_attempts = Counter(
            "switchboard_webhook_attempts", "Webhook delivery attempts this worker made, by outcome (succeeded;"
            " retry: a timeout, connection error, 408, 429 or 5xx with attempts left; failed; gone: 410, the"
            " endpoint disabled)", ["outcome"], registry=self.registry,
        )  # fmt: skip
        self.webhook_sending = Gauge(
            "switchboard_webhook_sending", "Webhook deliveries this worker is sending now", registry=self.registry
        )
        # Every outcome from the start: a labelled family shows a label set only once it is used, so a worker
        # whose steps never failed served no error series, and the dashboard's errors-per-second panel
        # (`sum(rate(..._count{outcome="error"}[5m]))`) had no data rather than 0.
        for histogram in (self.steps, self.tools):
            for outcome in OUTCOMES:
                histogram.labels(outcome)
        self.running = Gauge("switchboard_worker_jobs_running", "Jobs this worker is running", registry=self.registry)
        self.redis_rtt = redis_rtt_histogram(self.registry)
        ProcessCollector(registry=self.registry)
        self._probe: asyncio.Task[None] | None = None
        self._server: WSGIServer | None = None

    def start(self, round_trip: Callable[[], Awaitable[float]], settings: WorkerSettings, *, serve: bool) -> None:
        """Time PINGs to Redis (`round_trip`: `Broker.round_trip`) and, when `serve` (a worker process of
        its own: workers inside the tests would share the port), serve /metrics from a thread."""
        self._probe = asyncio.create_task(probe_redis(round_trip, self.redis_rtt, settings.redis_probe_s))
        if serve and settings.worker_metrics_port:
            try:
                self._server, _ = start_http_server(settings.worker_metrics_port, settings.host, self.registry)
            except OSError as error:
                # Metrics are not worth a worker: it runs steps without them, and says so.
                logger.error("cannot serve metrics on %s:%d: %s", settings.host, settings.worker_metrics_port, error)

    def stop(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def tokens(self, provider_id: str, model: str, agent_id: str, counts: dict[str, int]) -> None:
        """Count a step's tokens (`counts`: Usage.fields()). An API key holder names models and makes agents
        at will, so a worker keeps at most TOKEN_SERIES (provider, model, agent) label sets: the steps of
        any further ones count under model and agent "other"."""
        labels = (provider_id, model[:MODEL_LABEL_LIMIT], agent_id)
        if labels not in self._token_labels:
            if len(self._token_labels) >= TOKEN_SERIES:
                labels = (provider_id, "other", "other")
            self._token_labels.add(labels)
        for name, value in counts.items():
            self.model_tokens.labels(name.removesuffix("_tokens"), *labels).inc(value)

    @contextlib.contextmanager
    def timed(self, histogram: Histogram) -> Iterator[None]:
        """Count a job as running while the block runs, and observe its time by outcome."""
        self.running.inc()
        started, outcome = time.perf_counter(), "error"
        try:
            yield
            outcome = "ok"
        finally:
            self.running.dec()
            histogram.labels(outcome).observe(time.perf_counter() - started)
