"""The worker process: keeps its share of the partitions (their timers and their work), and runs the work.

Model steps and server tool calls are entries of per-partition Redis Streams read through the consumer
group `workers` (`broker/services/work.py`); a worker keeps the partitions the live workers' rendezvous split gives
it (`workers/keeper.py`), visits each when its alarm rings (`workers/timekeeper.py`) and takes its work
when it says so (`workers/runner.py`). arq, which ran steps before, has no Redis Cluster support
(python-arq/arq#385), so it is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket

from broker import Broker
from broker.errors import NotFound, SwitchboardError
from broker.run_spans import RunSpans
from broker.services.keepers import host_healthy
from broker.services.token_cipher import TokenCipher
from broker.services.work import Entry
from common.addresses import Resolver
from common.codec import uuid7
from common.jsonlog import log_ids
from common.runtime import settle_heap
from common.tasks import cancel_and_wait
from common.tracing import Tracing, TracingSettings
from workers.backlog import Backlog
from workers.inbox_notices import inbox_consumer
from workers.keeper import Keeper
from workers.mcp.calls import McpCalls
from workers.mcp.grant_tokens import GrantTokens
from workers.mcp.hub import McpHub
from workers.metrics import WorkerMetrics
from workers.models.registry import ModelRegistry
from workers.notices import Notices
from workers.runner import Runner
from workers.server_tools import ServerToolRunner
from workers.settings import WorkerSettings
from workers.steps import StepRunner
from workers.timekeeper import Timekeeper
from workers.tools import load_registry
from workers.tracing import RunTracer
from workers.webhooks import WebhookConsumer, WebhookSender

logger = logging.getLogger(__name__)


class _Jobs:
    """Runs one work entry: a step, a server tool call, a notable event's notice, or the release of a
    run-scoped client."""

    def __init__(
        self, broker: Broker, steps: StepRunner, tools: ServerToolRunner, notices: Notices, metrics: WorkerMetrics
    ) -> None:
        self._broker = broker
        self._steps = steps
        self._tools = tools
        self._notices = notices
        self._metrics = metrics

    async def __call__(self, entry: Entry) -> None:
        session_id, metrics = entry.session_id, self._metrics
        if entry.kind == "s":
            run_id, step, attempt = entry.detail
            with log_ids(session_id=session_id, run_id=run_id), metrics.timed(metrics.steps):
                await self._steps.run(session_id, run_id, int(step), int(attempt), entry.entry_id)
        elif entry.kind == "t":
            (call_id,) = entry.detail
            with log_ids(session_id=session_id, call_id=call_id), metrics.timed(metrics.tools):
                await self._tools.run(session_id, call_id, entry.entry_id)
        elif entry.kind == "n":
            with log_ids(session_id=session_id):
                await self._notices.run(entry)
        else:
            (client_id,) = entry.detail
            # A run-scoped registration leaves with its run (`client_left` departed).
            with contextlib.suppress(NotFound):
                await self._broker.clients.leave(session_id, client_id)
            await self._broker.work.done(entry.partition, entry.entry_id)


async def _arm_older_sessions(broker: Broker) -> None:
    # Sessions created before the retention and trim timers get theirs once; any worker may do it, and
    # two doing it at once arm nothing twice.
    try:
        await broker.retention.arm_every_session()
    except SwitchboardError as error:
        logger.warning("older sessions do not have their retention timers yet (the next start tries again): %s", error)


async def serve(
    settings: WorkerSettings,
    url: str,
    *,
    stop: asyncio.Event | None = None,
    resolver: Resolver | None = None,
    tracing: Tracing | None = None,
) -> None:
    """Run a worker until SIGTERM or SIGINT (running steps get SWITCHBOARD_STEP_TIMEOUT_S to finish) or,
    in process, until `stop` is set; signal handlers are installed only when no `stop` is given.
    `resolver` answers for provider host names (the system's when None); `tracing`: the process's spans'
    way out (when None, as the environment says: docs/observability.md)."""
    own_process = stop is None
    own_tracing = tracing is None
    tracing = tracing or Tracing.start(TracingSettings(), "switchboard-worker")
    stop = stop or asyncio.Event()
    broker = await Broker.connect(settings, url, role="switchboard-worker", resolver=resolver)
    worker_id = f"{socket.gethostname()}/{uuid7()}"
    registry = load_registry(settings.server_tools_module)
    models = ModelRegistry(broker)
    metrics = WorkerMetrics()
    hub = McpHub(broker.providers.addresses, metrics)
    mcp_calls = McpCalls(settings.mcp_calls_per_grant, settings.mcp_calls_per_worker, metrics)
    # OAuth grants' tokens: opened with the deployment's secret, so none without it.
    tokens = (
        None
        if settings.secret_key is None
        else GrantTokens(
            broker,
            TokenCipher(settings.secret_key),
            settings.public_url,
            settings.mcp_authorization_timeout_s,
            refused=hub.refused,
            challenges=hub.challenges,
        )
    )
    server_tools = ServerToolRunner(broker, registry, hub, models, mcp_calls, tracing, tokens)
    sender = WebhookSender(broker, broker.providers.addresses, metrics)
    # The consumers of notable events, in order: webhooks, then the workspace inbox.
    notices = Notices(broker, [WebhookConsumer(broker, sender), inbox_consumer(broker.inbox)])
    steps = StepRunner(broker, models, registry, hub, metrics, RunTracer(tracing, broker), tokens)
    jobs = _Jobs(broker, steps, server_tools, notices, metrics)
    # Shared by the keeper and the runner: due timers (a schedule's firing first of all) before new work.
    backlog = Backlog()
    runner = Runner(broker, worker_id, jobs, max_jobs=settings.worker_max_jobs, backlog=backlog)
    timekeeper = Timekeeper(broker, worker_id, runner.run, RunSpans(tracing, broker))
    host = socket.gethostname()
    keeper = Keeper(
        broker,
        worker_id,
        host,
        visit=timekeeper.visit,
        visit_many=timekeeper.visit_many,
        work=runner.wake,
        offers=models.offers,
        backlog=backlog,
    )
    if own_process:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
    try:
        runner.start()
        sender.start()
        await keeper.start()
        metrics.start(broker.round_trip, settings, serve=own_process)
        if own_process:
            settle_heap()
        arming = asyncio.create_task(_arm_older_sessions(broker))
        await stop.wait()
        # Ended before the broker closes: a command cut off later could open a connection nobody closes.
        await cancel_and_wait([arming])
        logger.info("stopping: no new work; %d running get up to %g s", runner.running, settings.step_timeout_s)
    finally:
        # Leave first: the others keep this worker's partitions at once, while its running work ends.
        await keeper.stop(leave=True)
        await asyncio.gather(
            runner.drain(settings.step_timeout_s),
            server_tools.drain(settings.step_timeout_s),
            sender.stop(settings.webhook_timeout_s),
        )
        metrics.stop()
        await hub.close()
        await models.aclose()
        await broker.close()
        if own_tracing:
            # What is left of the spans goes out (or is given up at the exporter's timeout), off the loop.
            await asyncio.to_thread(tracing.shutdown)


async def healthy(settings: WorkerSettings, url: str) -> bool:
    """Whether this host's worker refreshed its health key within the last lease (`worker --check`)."""
    return await host_healthy(url, settings.key_prefix, socket.gethostname())
