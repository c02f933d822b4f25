"""Debian's `prometheus` and `prometheus-redis-exporter` as real processes, configured from deploy/compose (the
exporter's environment, Prometheus's scrape jobs) with this machine's addresses in place of the stack's, and
the dashboard's queries as Grafana would send them (tests/e2e/test_dashboards.py)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from broker.transport.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "compose"
DASHBOARD = ROOT / "deploy" / "grafana" / "switchboard.json"
PACKAGES = "`.ci/run` installs Debian's prometheus and prometheus-redis-exporter packages"


def binary(name: str) -> str:
    """A binary of the Debian packages, else the test skips naming it."""
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"no {name} on PATH: {PACKAGES}")
    return found


def exporter_env(redis_addr: str, password: str) -> dict[str, str]:
    """The redis-exporter service's environment in compose.yaml, its Redis's address and password being
    this test's: every other setting (the streams and keys it checks) exactly as the stack runs it."""
    service = yaml.safe_load((COMPOSE / "compose.yaml").read_text())["services"]["redis-exporter"]
    env = {str(name): str(value) for name, value in service["environment"].items()}
    env |= {"REDIS_ADDR": redis_addr, "REDIS_PASSWORD": password}
    unresolved = {name for name, value in env.items() if "${" in value}
    assert not unresolved, f"compose gives the exporter settings this test does not fill in: {unresolved}"
    return env


def scrape_config(targets: dict[str, str], interval_s: int) -> dict[str, Any]:
    """deploy/compose/prometheus.yml with each job's service discovery replaced by `targets` (job name ->
    host:port) and every interval `interval_s`: the same jobs and metrics paths, scraped often enough to
    see a test's traffic within seconds."""
    config: dict[str, Any] = yaml.safe_load((COMPOSE / "prometheus.yml").read_text())
    jobs = config["scrape_configs"]
    assert {job["job_name"] for job in jobs} == set(targets), "a scrape job of the stack this test does not start"
    interval = f"{interval_s}s"
    config["global"] = {"scrape_interval": interval, "evaluation_interval": interval}
    for job in jobs:
        job.pop("dns_sd_configs", None)
        job.pop("scrape_interval", None)
        job["static_configs"] = [{"targets": [targets[job["job_name"]]]}]
    return config


@dataclass
class Daemon:
    """A process of ours, its output in a file."""

    process: subprocess.Popen[bytes]
    log: Path
    url: str

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self) -> str:
        return self.output()[-4000:]

    def wait_ready(self, path: str, wait_s: float = 20) -> None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.url} exited at start:\n{self.tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}{path}", timeout=1) as answer:  # noqa: S310 (ours, local)
                if answer.status == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"{self.url} was not ready within {wait_s} s:\n{self.tail()}")


@contextlib.contextmanager
def daemon(argv: list[str], env: dict[str, str], logs: Path, name: str, url: str, ready: str) -> Iterator[Daemon]:
    """`argv` running (its environment `env` and PATH alone: nothing of this machine's leaks in), ready at
    `url` + `ready`; stopped after the block."""
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv, env={"PATH": os.environ.get("PATH", ""), **env}, stdout=out, stderr=subprocess.STDOUT, cwd=logs
        )
    running = Daemon(process, log, url)
    try:
        running.wait_ready(ready)
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def redis_exporter(redis_addr: str, password: str, logs: Path) -> Iterator[Daemon]:
    listen = f"127.0.0.1:{free_port()}"
    env = exporter_env(redis_addr, password) | {"REDIS_EXPORTER_WEB_LISTEN_ADDRESS": listen}
    argv = [binary("prometheus-redis-exporter")]
    with daemon(argv, env, logs, "redis-exporter", f"http://{listen}", "/health") as running:
        yield running


@contextlib.contextmanager
def prometheus(config: dict[str, Any], data: Path) -> Iterator[Daemon]:
    data.mkdir(parents=True, exist_ok=True)
    path = data / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    listen = f"127.0.0.1:{free_port()}"
    argv = [
        binary("prometheus"),
        f"--config.file={path}",
        f"--storage.tsdb.path={data / 'tsdb'}",
        f"--web.listen-address={listen}",
        "--log.level=warn",
    ]
    with daemon(argv, {}, data, "prometheus", f"http://{listen}", "/-/ready") as running:
        yield running


async def query(client: httpx.AsyncClient, expr: str) -> list[dict[str, Any]]:
    """An instant query's series, through Prometheus's HTTP API (what Grafana asks it)."""
    answer = await client.get("/api/v1/query", params={"query": expr})
    body = answer.json()
    assert answer.status_code == 200, (expr, body)
    assert body["status"] == "success", (expr, body)
    series: list[dict[str, Any]] = body["data"]["result"]
    return series


def has_data(series: list[dict[str, Any]]) -> bool:
    """At least one series with a number: a quantile of a histogram that saw nothing in its window is NaN,
    which Grafana draws as no data."""
    return any(not math.isnan(float(one["value"][1])) for one in series)


async def targets_up(client: httpx.AsyncClient) -> dict[str, str]:
    """Each scrape job's health (up, down, unknown) and its last error."""
    answer = (await client.get("/api/v1/targets")).json()
    return {t["labels"]["job"]: f"{t['health']} {t['lastError']}".strip() for t in answer["data"]["activeTargets"]}


_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def dashboard_queries() -> list[tuple[str, str]]:
    """Every (panel title, expression) of the dashboard, rows' collapsed panels included, with its template
    variables filled in with their current values as Grafana would on opening it."""
    dashboard = json.loads(DASHBOARD.read_text())
    values = {v["name"]: str(v["current"]["value"]) for v in dashboard.get("templating", {}).get("list", [])}

    def fill(expr: str) -> str:
        def value(match: re.Match[str]) -> str:
            name = next(group for group in match.groups() if group)
            assert name in values, f"{expr!r} uses ${name}, which the dashboard does not define"
            return values[name]

        return _VARIABLE.sub(value, expr)

    found: list[tuple[str, str]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            found.extend((panel["title"], fill(t["expr"])) for t in panel.get("targets", []) if t.get("expr"))
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    return found
