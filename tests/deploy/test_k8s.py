"""deploy/k8s: every overlay renders with `kubectl kustomize`, every object validates against the
Kubernetes API's schema (kubernetes-validate, offline; the KEDA ScaledObject against the fields KEDA
documents), and the objects agree with the code: settings, routes, the command line, the drain times."""

from __future__ import annotations

import base64
import ipaddress
import shutil
from functools import cache
from typing import Any

import kubernetes_validate
import pytest
import yaml

from switchboard.settings import Settings
from tests.deploy.shared import DEPLOY, SETTINGS_ENV, cli_accepts, env_names, routes, run

pytestmark = [
    pytest.mark.deploy,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (for `kubectl kustomize`) is not on PATH"),
]

OVERLAYS = ("dev", "prod", "prod-keda")
K8S_VERSION = "1.30.0"


@cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    result = run(["kubectl", "kustomize", str(DEPLOY / "k8s" / "overlays" / overlay)], DEPLOY)
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def of_kind(overlay: str, kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in rendered(overlay) if doc["kind"] == kind}


def containers(overlay: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, container) of every workload."""
    found = []
    for kind in ("Deployment", "StatefulSet"):
        for workload in of_kind(overlay, kind).values():
            spec = workload["spec"]["template"]["spec"]
            found += [(spec, container) for container in spec["containers"]]
    return found


SCALED_OBJECT_SPEC = {
    # The fields KEDA's ScaledObject CRD (keda.sh/v1alpha1) defines that a ScaledObject may use here.
    "scaleTargetRef": dict,
    "minReplicaCount": int,
    "maxReplicaCount": int,
    "pollingInterval": int,
    "cooldownPeriod": int,
    "triggers": list,
}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_against_the_api_schema(overlay: str) -> None:
    for doc in rendered(overlay):
        if doc["kind"] == "ScaledObject":
            assert doc["apiVersion"] == "keda.sh/v1alpha1"
            assert set(doc["spec"]) <= set(SCALED_OBJECT_SPEC)
            for name, kind in SCALED_OBJECT_SPEC.items():
                assert isinstance(doc["spec"][name], kind), name
            assert {"name"} <= set(doc["spec"]["scaleTargetRef"])
            assert all({"type", "metadata"} <= set(trigger) for trigger in doc["spec"]["triggers"])
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_env_they_set_is_what_the_settings_read(overlay: str) -> None:
    for config in of_kind(overlay, "ConfigMap").values():
        assert set(config["data"]) <= SETTINGS_ENV, set(config["data"]) - SETTINGS_ENV
        Settings.model_validate(
            {key.removeprefix("SWITCHBOARD_").lower(): value for key, value in config["data"].items()}
        )
    for _, container in containers(overlay):
        if container["name"] in ("api", "worker"):
            assert env_names(container) <= SETTINGS_ENV


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_and_commands_point_at_what_exists(overlay: str) -> None:
    for _, container in containers(overlay):
        ports = {port["name"] for port in container.get("ports", [])}
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            check = container.get(probe)
            if check is None or container["name"] not in ("api", "worker"):
                continue
            if "httpGet" in check:
                assert check["httpGet"]["path"] in routes(), (container["name"], probe)
                assert check["httpGet"]["port"] in ports
            else:
                command = check["exec"]["command"]
                assert command[0] == "switchboard"
                assert cli_accepts(command[1:])
        if container["name"] in ("api", "worker"):
            assert container.get("command") is None, "the image's entry point is `switchboard`"
            assert cli_accepts(container["args"])
    api = of_kind(overlay, "Deployment")["switchboard-api"]["spec"]["template"]["spec"]["containers"][0]
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    worker = of_kind(overlay, "Deployment")["switchboard-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert worker["livenessProbe"]["exec"]["command"] == ["switchboard", "worker", "--check"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_grace_periods_outlast_the_drains(overlay: str) -> None:
    config = next(iter(of_kind(overlay, "ConfigMap").values()))["data"]
    deployments = of_kind(overlay, "Deployment")
    worker_grace = deployments["switchboard-worker"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert worker_grace > float(config["SWITCHBOARD_STEP_TIMEOUT_S"])
    api_grace = deployments["switchboard-api"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    in_flight_s = 10  # api.server.GRACEFUL_SHUTDOWN_S
    assert api_grace > float(config["SWITCHBOARD_DRAIN_GRACE_S"]) + in_flight_s


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_workload_is_locked_down_and_sized(overlay: str) -> None:
    for spec, container in containers(overlay):
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert spec["automountServiceAccountToken"] is False
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])
        assert "memory" in container["resources"]["limits"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_autoscalers_and_budgets_select_the_deployments(overlay: str) -> None:
    deployments = of_kind(overlay, "Deployment")
    scalers = {**of_kind(overlay, "HorizontalPodAutoscaler"), **of_kind(overlay, "ScaledObject")}
    assert {scaler["spec"]["scaleTargetRef"]["name"] for scaler in scalers.values()} == set(deployments)
    budgets = of_kind(overlay, "PodDisruptionBudget")
    for name, deployment in deployments.items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert budgets[name]["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_worker_scales_on_queue_depth_by_hpa_or_by_keda() -> None:
    hpa = of_kind("prod", "HorizontalPodAutoscaler")["switchboard-worker"]
    assert hpa["spec"]["metrics"][0]["external"]["metric"]["name"] == "switchboard_queue_depth"
    assert "switchboard-worker" not in of_kind("prod-keda", "HorizontalPodAutoscaler")
    keda = of_kind("prod-keda", "ScaledObject")["switchboard-worker"]
    assert "switchboard_queue_depth" in keda["spec"]["triggers"][0]["metadata"]["query"]


def test_dev_runs_redis_in_the_cluster_and_prod_expects_it_outside() -> None:
    dev_redis = of_kind("dev", "StatefulSet")["switchboard-redis"]
    assert "--appendonly" in dev_redis["spec"]["template"]["spec"]["containers"][0]["args"]
    assert dev_redis["spec"]["volumeClaimTemplates"]
    secret = next(iter(of_kind("dev", "Secret").values()))
    assert {"redis-url", "bootstrap-api-key"} <= set(secret["data"])
    key = base64.b64decode(secret["data"]["bootstrap-api-key"]).decode()
    assert Settings(bootstrap_api_key=key).bootstrap_api_key is not None
    assert not of_kind("prod", "StatefulSet")
    assert not of_kind("prod", "Secret")
    # Both read the Redis URL from the Secret the overlay supplies (generated in dev, made by ops in prod).
    for overlay in ("dev", "prod"):
        api = of_kind(overlay, "Deployment")["switchboard-api"]["spec"]["template"]["spec"]["containers"][0]
        url = next(item for item in api["env"] if item["name"] == "SWITCHBOARD_REDIS_URL")
        assert url["valueFrom"]["secretKeyRef"]["key"] == "redis-url"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_api_believes_forwarded_addresses_only_from_inside_the_cluster(overlay: str) -> None:
    config = next(iter(of_kind(overlay, "ConfigMap").values()))["data"]
    api = of_kind(overlay, "Deployment")["switchboard-api"]["spec"]["template"]["spec"]["containers"][0]
    assert {"configMapRef": {"name": next(iter(of_kind(overlay, "ConfigMap")))}} in api["envFrom"]
    trusted = Settings(trusted_proxies=config["SWITCHBOARD_TRUSTED_PROXIES"]).trusted_proxy_list
    # The ingress controller's pods are somewhere in the cluster's private ranges; the internet is not.
    assert trusted
    assert all(ipaddress.ip_network(item).is_private for item in trusted)
    assert Settings(header_timeout_s=config["SWITCHBOARD_HEADER_TIMEOUT_S"]).header_timeout_s == 10
