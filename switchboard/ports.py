"""The ports `switchboard up` will bind, each tried before anything starts: a busy API port (or a busy
metrics port the user chose) stops `up` at once with a line naming the port and its setting; a busy
default metrics port (a second `up` on this machine) is swapped for a free one."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from switchboard.settings import Settings

# How far past a busy port to look for a free one to suggest.
_SUGGEST_WITHIN = 20


def bindable(host: str, port: int) -> bool:
    """Whether `port` on `host` can be bound now, as uvicorn and the metrics server bind it (SO_REUSEADDR,
    so a port left in TIME_WAIT by a `up` just stopped is not taken for busy)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _free_near(host: str, port: int, taken: set[int]) -> int | None:
    for candidate in range(port + 1, min(port + _SUGGEST_WITHIN, 65535) + 1):
        if candidate not in taken and bindable(host, candidate):
            return candidate
    return None


def _any_free(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def busy(port: int, setting: str, host: str, taken: set[int]) -> str:
    """The line `up` stops with when `port` (`setting`'s value) is in use."""
    other = _free_near(host, port, taken)
    example = f", e.g. {setting}={other} switchboard up" if other is not None else ""
    return f"switchboard up: port {port} is in use ({setting}): stop what holds it or pick another{example}"


@dataclass(frozen=True)
class Ports:
    """What `up` binds: the API's port, and the worker's metrics port (0: none)."""

    api: int
    metrics: int
    note: str | None = None
    """Why the metrics port is not the one configured, when it is not."""


def check_ports(settings: Settings) -> Ports:
    """The ports `up` will use, every one free now, or SystemExit with the line naming the busy one."""
    host = settings.host
    if not bindable(host, settings.port):
        raise SystemExit(busy(settings.port, "SWITCHBOARD_PORT", host, {settings.worker_metrics_port}))
    metrics = settings.worker_metrics_port
    if metrics == 0:
        return Ports(settings.port, 0)
    if metrics != settings.port and bindable(host, metrics):
        return Ports(settings.port, metrics)
    if "worker_metrics_port" in settings.model_fields_set:
        # Chosen by the user: a port they named is not silently moved.
        raise SystemExit(busy(metrics, "SWITCHBOARD_WORKER_METRICS_PORT", host, {settings.port}))
    # The default port held (most often by another `up` on this machine): metrics are not worth
    # refusing to start for, and a free port serves them as well.
    moved = _any_free(host)
    note = (
        f"switchboard up: port {metrics} (SWITCHBOARD_WORKER_METRICS_PORT's default) is in use, "
        f"so the worker serves /metrics on port {moved}"
    )
    return Ports(settings.port, moved, note)
