"""What every scenario shares: figures and their statistics, the cluster under test, an HTTP client."""

from __future__ import annotations

import contextlib
import enum
import json
import os
import resource
import secrets
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
from redis.asyncio import Redis

from bench.http import RawHttp
from broker.transport.embedded import EmbeddedCluster, EmbeddedRedis
from switchboard.processes import Processes

_T = TypeVar("_T")


class Size(enum.Enum):
    """How much each scenario does. FULL is the figures to quote, QUICK fewer samples of the same (the
    sizes both have always had: the figures in docs/performance.md come from them). SMOKE is the least
    that still runs every path a scenario measures and reports every figure it reports: it shows that
    each scenario works (CI runs it), and its figures are too small a sample to hold to a target."""

    SMOKE = "smoke"
    QUICK = "quick"
    FULL = "full"

    def pick(self, *, smoke: _T, quick: _T, full: _T) -> _T:
        """The value for this size."""
        return {Size.SMOKE: smoke, Size.QUICK: quick, Size.FULL: full}[self]

    @property
    def judged(self) -> bool:
        """Whether figures at this size are held to their targets."""
        return self is not Size.SMOKE


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured value, the baseline it is held against (measured in the same run), and its target.
    `ratio` is value / baseline; `target` reads like `ratio <= 3` or `value >= 2000`."""

    scenario: str
    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    target: str = ""
    met: bool | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        assert self.baseline is not None
        return self.value / self.baseline


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
        "mean": statistics.fmean(values) if values else float("nan"),
    }


def judge(value: float, baseline: float | None, target: str) -> bool | None:
    """Evaluate a target such as `ratio <= 3`, `value < 10` or `ratio <= 0.2` (no eval of anything else)."""
    if not target:
        return None
    subject, op, bound = target.split()
    left = value / baseline if subject == "ratio" and baseline else value
    limit = float(bound)
    return {"<": left < limit, "<=": left <= limit, ">": left > limit, ">=": left >= limit}[op]


def figure(scenario: str, name: str, value: float, unit: str, **more: Any) -> Figure:
    target = more.get("target", "")
    return Figure(scenario, name, value, unit, **more, met=judge(value, more.get("baseline"), target))


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"


def unjudged(figures: Sequence[Figure]) -> list[Figure]:
    """The figures with no verdict on their targets (a smoke run's: too small a sample to judge)."""
    return [replace(f, met=None) for f in figures]


def _verdict(f: Figure) -> str:
    return "" if f.met is None else ("yes" if f.met else "NO")


SMOKE_HEADING = "smoke run: every scenario at its smallest size; no target is judged"


def table(figures: Sequence[Figure], judged: bool = True) -> str:
    """The figures as a text table; a run that is not `judged` (smoke) says so above it, and its `met`
    column reads `not judged` wherever a figure has a target."""
    rows = [("scenario", "figure", "value", "baseline", "ratio", "target", "met", "note")]
    for f in figures:
        baseline = f"{_number(f.baseline)} ({f.baseline_name})" if f.baseline is not None else ""
        ratio = f"{f.ratio:.3g}x" if f.ratio is not None else ""
        met = _verdict(f) if judged else ("not judged" if f.target else "")
        rows.append((f.scenario, f.name, f"{_number(f.value)} {f.unit}", baseline, ratio, f.target, met, f.note))
    text = columns(rows)
    return text if judged else f"{SMOKE_HEADING}\n{text}"


def columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows as aligned text columns, the first row a heading."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def save(figures: Sequence[Figure], out: Path, meta: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {"meta": meta, "figures": [asdict(f) | {"ratio": f.ratio} for f in figures]}
    out.write_text(json.dumps(body, indent=2))


def default_out() -> Path:
    return Path("bench/results") / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"


@dataclass
class Cluster:
    """Redis, one API and one worker, started for the benchmarks; the API process is `api`."""

    redis: EmbeddedRedis
    processes: Processes
    url: str
    key: str
    env: dict[str, str]
    api_pid: int = 0
    workdir: Path = field(default_factory=Path)
    nodes: list[EmbeddedRedis] = field(default_factory=list)
    made: EmbeddedCluster | None = None

    def client(self, token: str | None = None, **options: Any) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=options.pop("connections", 200), max_keepalive_connections=200)
        headers = {"Authorization": f"Bearer {token or self.key}"}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60, limits=limits, **options)


BENCH_SETTINGS = {
    "SWITCHBOARD_ACK_TIMEOUT_S": "60",
    "SWITCHBOARD_RESULT_TIMEOUT_S": "300",
    "SWITCHBOARD_WORKER_MAX_JOBS": "200",
    # One load generator drives thousands of requests a second through one credential: the limit that
    # protects a deployment from one client would measure itself, not the path under it.
    "SWITCHBOARD_RATE_LIMIT_PER_S": "0",
    # No scenario measures shutdown, and no balancer needs the API to keep serving after SIGTERM (its 2 s
    # drain grace): each of a run's tens of API processes stops at once.
    "SWITCHBOARD_DRAIN_GRACE_S": "0",
}


@contextlib.contextmanager
def cluster(
    *,
    notifications: bool = True,
    extra: dict[str, str] | None = None,
    workers: int = 1,
    masters: int = 0,
    replicas: int = 0,
    before: Callable[[list[EmbeddedRedis]], None] = lambda _: None,
    redis_wrapper: Sequence[str] = (),
    redis_options: Sequence[str] = (),
) -> Iterator[Cluster]:
    """Redis (one, or a Redis Cluster of `masters` with `replicas` each when given), one API and `workers`
    workers. `before` sees the Redis nodes once they run and before any Switchboard process starts.
    `redis_options`: the one server's arguments beyond the recommended ones (a scenario measuring what a
    recommended setting is worth overrides it)."""
    workdir = Path(tempfile.mkdtemp(prefix="switchboard-bench-"))
    nodes: list[EmbeddedRedis]
    made: EmbeddedCluster | None = None
    if masters:
        made = EmbeddedCluster(workdir / "cluster", masters=masters, replicas=replicas)
        made.start()
        nodes = made.nodes
    else:
        nodes = [
            EmbeddedRedis(
                workdir / "redis",
                persistent=False,
                notifications=notifications,
                wrapper=redis_wrapper,
                options=redis_options,
            )
        ]
        # A server under a profiler starts tens of times slower.
        nodes[0].start(wait_s=120.0 if redis_wrapper else 10.0)
    redis = nodes[0]
    before(nodes)
    key = "swb_ak_" + secrets.token_urlsafe(32)
    env = {
        "SWITCHBOARD_REDIS_URL": redis.url,
        "SWITCHBOARD_BOOTSTRAP_API_KEY": key,
        "SWITCHBOARD_KEY_PREFIX": "bench",
        **BENCH_SETTINGS,
        **(extra or {}),
    }
    logs = workdir / "logs"
    logs.mkdir()
    processes = Processes(env, logs)
    try:
        # The workers first: they start while the API gets ready, which is what api() waits for.
        for number in range(workers):
            processes.worker(name=f"worker-{number}")
        api, url = processes.api()
        yield Cluster(redis, processes, url, key, env, api.pid, workdir, nodes, made)
    finally:
        processes.stop_all()
        if made is not None:
            made.stop()
        else:
            redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)


SCRIPTED = {"format": "openai_responses", "model": "scripted", "max_tokens": 1000, "context_window": 8000}
TOOL = {"name": "x", "description": "A benchmark tool", "parameters": {"type": "object"}}


async def scripted_agent(admin: httpx.AsyncClient, **config: Any) -> str:
    providers = (await admin.get("/v1/model-providers")).json()["items"]
    scripted = next(p["id"] for p in providers if p["display_name"] == "Scripted")
    agent = (await admin.post("/v1/agents", json={"name": "bench"})).json()
    version = {"model_provider_id": scripted, "model": SCRIPTED, **config}
    (await admin.post(f"/v1/agents/{agent['id']}/versions", json=version)).raise_for_status()
    return str(agent["id"])


async def new_session(admin: httpx.AsyncClient, agent_id: str) -> tuple[str, str]:
    created = (await admin.post("/v1/sessions", json={"agent_id": agent_id})).json()
    return created["id"], created["session_token"]


@dataclass
class Registered:
    """A session with one registered client (`web`, never lapsing, offering TOOL), and a lean HTTP client
    holding its token that sends an Idempotency-Key on every keyed call, as the SDK does."""

    id: str
    token: str
    client_id: str
    http: RawHttp

    async def post(self, path: str, body: object = None) -> bytes:
        status, content = await self.http.request("POST", f"/v1/sessions/{self.id}{path}", body, keyed())
        if status >= 300:
            raise RuntimeError(f"POST {path}: {status} {content[:200]!r}")
        return content

    async def send(self, text: str) -> None:
        await self.post("/events", {"type": "input", "text": text})

    async def ack(self, call_id: str) -> None:
        await self.post(f"/clients/{self.client_id}/calls/{call_id}/ack")

    async def answer(self, call_id: str) -> float:
        """Ack, then post the result; when the result was sent (epoch s)."""
        await self.ack(call_id)
        posted = time.time()
        await self.post(f"/clients/{self.client_id}/calls/{call_id}/result", {"text": "ok"})
        return posted

    def close(self) -> None:
        self.http.close()

    async def log(self) -> list[dict[str, Any]]:
        """The whole log, oldest first."""
        found: list[dict[str, Any]] = []
        query = "?order=asc&limit=200"
        while True:
            status, content = await self.http.request("GET", f"/v1/sessions/{self.id}/events{query}")
            assert status == 200, content
            page = json.loads(content)
            found += page["items"]
            if page["next_cursor"] is None:
                return found
            query = f"?order=asc&limit=200&after_seq={page['next_cursor']}"


async def registered(cluster: Cluster, admin: httpx.AsyncClient, agent_id: str) -> Registered:
    session_id, token = await new_session(admin, agent_id)
    http = RawHttp(cluster.url, token)
    body = {"name": "web", "lifetime": {"type": "never"}, "tools": [TOOL]}
    status, content = await http.request("POST", f"/v1/sessions/{session_id}/clients", body, keyed())
    assert status == 201, content
    return Registered(session_id, token, json.loads(content)["id"], http)


def calls_text(count: int) -> str:
    """An input the scripted model answers with `count` parallel calls of the client tool."""
    return "\n".join(["/call client__web__x"] * count)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def created_at_s(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["created_at"]).timestamp()


def keyed() -> dict[str, str]:
    """A fresh Idempotency-Key, as the SDK sends on every keyed call."""
    return {"Idempotency-Key": secrets.token_hex(16)}


def cpu_seconds(pid: int) -> float:
    """User plus system CPU a process has used (from /proc, in clock ticks of 10 ms)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def redis_cpu_s(node: EmbeddedRedis) -> float:
    """Redis's own CPU so far (user plus system, s), from INFO cpu."""
    redis = Redis.from_url(node.url)
    try:
        cpu = await redis.info("cpu")
    finally:
        await redis.aclose()
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def cpu_count() -> int:
    return os.cpu_count() or 1


def enough_files(streams: int) -> None:
    """The reader and the API (which inherits it) each hold a descriptor per stream."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, streams + 1024)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < streams + 1024:
        raise RuntimeError(f"{streams} streams need {streams + 1024} file descriptors; the hard limit is {hard}")
