"""deploy/compose's `tracing` profile: Jaeger joins the stack, and the API and workers get the OTLP
endpoint the operator sets (unset: no tracing, the stack as before)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from common.tracing import TracingSettings
from tests.deploy.shared import DEPLOY, compose_binary, run

pytestmark = [pytest.mark.deploy, pytest.mark.xdist_group("compose")]

REQUIRED = {
    "REDIS_PASSWORD": "a-redis-password",
    "SWITCHBOARD_BOOTSTRAP_API_KEY": "swb_ak_" + "k" * 40,
    "GRAFANA_ADMIN_PASSWORD": "a-grafana-password",
}


def resolved(*profile: str, **env: str) -> dict[str, Any]:
    result = run(
        [compose_binary(), "-f", "compose.yaml", *profile, "config", "--format", "json"],
        DEPLOY / "compose",
        env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), **REQUIRED, **env},
    )
    assert result.returncode == 0, result.stderr
    stack: dict[str, Any] = json.loads(result.stdout)
    return stack


def test_the_tracing_profile_adds_jaeger_and_the_endpoint_reaches_api_and_workers() -> None:
    stack = resolved("--profile", "tracing", OTEL_EXPORTER_OTLP_ENDPOINT="http://jaeger:4318")
    assert "jaeger" in stack["services"]
    for name in ("api", "worker"):
        environment = stack["services"][name]["environment"]
        assert environment["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"
        assert TracingSettings.model_validate(
            {key.lower(): value for key, value in environment.items() if key.startswith("OTEL_")}
        ).enabled


def test_without_an_endpoint_nothing_traces() -> None:
    stack = resolved()
    assert "jaeger" not in stack["services"]
    for name in ("api", "worker"):
        environment = stack["services"][name]["environment"]
        settings = {key.lower(): value for key, value in environment.items() if key.startswith("OTEL_")}
        assert not TracingSettings.model_validate(settings).enabled
