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
        # The hot routes count every request: prometheus_client's `labels` checks and locks on each call,
        # which cost more than the count, so each route's children are looked up once.
        self.acked = self.calls.labels("acked")
        self.answered = self.calls.labels("answered")
        self._requests: dict[tuple[str, str, int], Counter] = {}

    def request(self, method: str, route: str, status: int) -> Counter:
        """The requests counter's child for one route and status."""
        key = (method, route, status)
        child = self._requests.get(key)
        if child is None:
            child = self._requests[key] = self.requests.labels(method, route, str(status))
        return child

    def render(self) -> bytes:
        return generate_latest(self.registry)
