"""The worker process: arq running model steps, beside the timekeeper, on one broker connection."""

from __future__ import annotations

import asyncio
import logging
import socket
from signal import Signals
from typing import Any

from arq.worker import Worker, func

from broker import Broker, Settings
from broker.codec import job_deserializer, job_serializer
from broker.runtime import settle_heap
from broker.work import RUN_STEP_JOB, RUN_TOOL_JOB, Work
from workers.metrics import WorkerMetrics
from workers.models.registry import ModelRegistry
from workers.server_tools import ServerToolRunner, run_tool
from workers.steps import MAX_TRIES, StepRunner, run_step
from workers.timekeeper import Timekeeper
from workers.tools import load_registry

logger = logging.getLogger(__name__)

HEALTH_CHECK_INTERVAL_S = 10
# Results are never read; they are kept only long enough for arq to refuse a duplicate job id.
KEEP_RESULT_S = 60


class _WakingWorker(Worker):
    """arq's worker, woken the moment a job is enqueued (`enqueue_job.lua` pushes a wake token) rather
    than at its next poll.

    arq sleeps its poll delay between polls of the queue; this one runs arq's loop with no delay and
    waits on the wake list instead, for at most `idle_poll_s`, so a continuation starts within a round
    trip of the result that owed it while an idle worker still polls (jobs arq itself re-queues, such as
    retries, are found that way). `_poll_iteration` is arq's own; arq is pinned to the version read."""

    def __init__(self, *, work: Work, idle_poll_s: float, claim_s: float, **options: Any) -> None:
        super().__init__(poll_delay=0, **options)
        # arq holds a job it took for its job timeout + 10 s (130 s by default) and does not renew that
        # claim: a worker that died between taking a job and beginning its step or server call would hold
        # the job that long. Here the claim is a lease, renewed by the step's or the call's own renewals
        # (renew_step.lua, renew_call.lua), so such a job is taken again after one lease. A claim that
        # lapses under a live worker costs one duplicate take, which begin_step / begin_server_call
        # refuse ('stale').
        self.in_progress_timeout_s = claim_s
        self._work = work
        self._idle_poll_s = idle_poll_s
        # Set by a stop signal: arq stops by cancelling its own loop, so the cancellation is the way out,
        # not an error.
        self.signalled = False
        # Set by an in-process drain: the loop ends between polls, never inside one (a poll cancelled in
        # arq's WATCH pipeline leaves that pipeline holding its connection).
        self.stop_requested = False
        self._waiting = False

    def handle_sig(self, signum: Signals) -> None:
        self.signalled = True
        super().handle_sig(signum)

    def handle_sig_wait_for_completion(self, signum: Signals) -> None:
        self.signalled = True
        super().handle_sig_wait_for_completion(signum)

    async def _poll_iteration(self) -> None:
        await super()._poll_iteration()
        if self.stop_requested:
            raise asyncio.CancelledError
        self._waiting = True
        try:
            if self.allow_pick_jobs and self.job_counter < self.max_jobs:
                await self._work.wait_for_job(self._idle_poll_s)
            else:
                # A full worker leaves the tokens to workers that can take the jobs.
                await asyncio.sleep(self._idle_poll_s)
        finally:
            self._waiting = False

    def request_stop(self) -> None:
        """End the loop at once if it is waiting between polls, else as soon as the poll in hand ends."""
        self.stop_requested = True
        if self._waiting and self.main_task is not None:
            self.main_task.cancel()


async def _drain_on(stop: asyncio.Event, worker: _WakingWorker) -> None:
    """Stop the way SIGTERM does: pick no more jobs and end the loop (after the poll in hand), then let
    the running steps finish, those that poll started included."""
    await stop.wait()
    worker.allow_pick_jobs = False
    worker.request_stop()
    if worker.main_task is not None:
        await asyncio.wait([worker.main_task])
    running = [task for task in worker.tasks.values() if not task.done()]
    if running:
        await asyncio.wait(running)


async def serve(settings: Settings, url: str, *, stop: asyncio.Event | None = None) -> None:
    """Run a worker until signalled (SIGTERM and SIGINT let running steps finish first) or, in process,
    until `stop` is set; signal handlers are installed only when no `stop` is given."""
    handle_signals = stop is None
    broker = await Broker.connect(settings, url, role="switchboard-worker")
    timekeeper = Timekeeper(broker)
    registry = load_registry(settings.server_tools_module)
    models = ModelRegistry(broker)
    steps = StepRunner(broker, models, registry)
    tools = ServerToolRunner(broker, registry)
    metrics = WorkerMetrics()

    async def on_startup(ctx: dict[str, object]) -> None:
        ctx["steps"] = steps
        ctx["tools"] = tools
        ctx["metrics"] = metrics
        await timekeeper.start()
        metrics.start(broker.core.redis, settings, serve=handle_signals)
        if handle_signals:  # a worker process of its own, not one inside the tests
            settle_heap()

    async def on_shutdown(ctx: dict[str, object]) -> None:
        metrics.stop()
        await timekeeper.stop()
        await models.aclose()

    worker = _WakingWorker(
        work=broker.work,
        idle_poll_s=settings.worker_poll_delay_s,
        claim_s=max(settings.step_lease_s, settings.server_call_lease_s),
        functions=[
            func(run_step, name=RUN_STEP_JOB, max_tries=MAX_TRIES),
            func(run_tool, name=RUN_TOOL_JOB, max_tries=MAX_TRIES),
        ],
        redis_pool=broker.core.arq,
        queue_name=broker.core.keys.queue,
        on_startup=on_startup,
        on_shutdown=on_shutdown,
        handle_signals=handle_signals,
        job_completion_wait=int(settings.step_timeout_s) if handle_signals else 0,
        max_jobs=settings.worker_max_jobs,
        job_timeout=settings.step_timeout_s,
        keep_result=KEEP_RESULT_S,
        max_tries=MAX_TRIES,
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
        health_check_key=broker.core.keys.worker_health(socket.gethostname()),
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        log_results=False,
    )
    drain = asyncio.create_task(_drain_on(stop, worker)) if stop is not None else None
    try:
        await worker.async_run()
    except asyncio.CancelledError:
        # Ending the loop is how arq stops, on our drain or on its own signal handler.
        if not (worker.signalled or worker.stop_requested):
            raise
        if drain is not None:
            await drain
    finally:
        if drain is not None:
            drain.cancel()
        await worker.close()
        await broker.close()


async def healthy(settings: Settings, url: str) -> bool:
    """Whether this host's worker refreshed its health key within the last interval (`worker --check`)."""
    from broker.client import create_redis
    from broker.keys import KeySpace

    redis = create_redis(url)
    try:
        return bool(await redis.exists(KeySpace(settings.key_prefix).worker_health(socket.gethostname())))
    finally:
        await redis.aclose()
