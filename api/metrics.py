"""Prometheus metrics of one API process (a registry per app, so tests can build many apps)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector, generate_latest

from broker.services.telemetry import redis_rtt_histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "switchboard_http_requests_total", "HTTP requests by route and status", ["method", "route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.calls = Counter(
            "switchboard_client_calls_total", "Client calls acked and answered through this process", ["event"],
            registry=self.registry,
        )  # fmt: skip
        self.streams = Gauge("switchboard_open_streams", "Open SSE event streams", registry=self.registry)
        self.redis_rtt = redis_rtt_histogram(self.registry)
        ProcessCollector(registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)
