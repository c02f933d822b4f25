"""Prometheus metrics of one API process (a registry per app, so tests can build many apps)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest


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

    def render(self) -> bytes:
        return generate_latest(self.registry)
