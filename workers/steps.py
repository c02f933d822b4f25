"""One model step of a run, as one work entry: begin, call the model, commit; never wait on a client.

While the model works, a watcher renews the step's lease (so a worker that dies loses the step to
another within a lease) and looks for a cancel (so a cancel ends even a long model call at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from broker import Broker
from broker.errors import BrokerUnavailable
from broker.services.providers import SCRIPTED_PROVIDER_ID
from broker.services.runs import RUN_GONE_CANCELLED, Committed
from common.codec import dumps
from common.events.build import message_assistant, step_timing
from common.tasks import cancel_and_wait
from workers.catalog import Catalog, Routed
from workers.config import RunConfig
from workers.deltas import DeltaStream
from workers.mcp.grant_tokens import GrantTokens, Lacking
from workers.mcp.grant_tokens import note as sign_in_note
from workers.mcp.hub import McpHub, McpTool
from workers.metrics import WorkerMetrics
from workers.models.base import ModelError, ModelRequest, StreamLimits, Turn
from workers.models.registry import ModelRegistry
from workers.models.retry import with_retries
from workers.settings import WorkerSettings
from workers.tools import Registry
from workers.tracing import FirstChunk, RunTracer, StepTrace
from workers.transcript import Transcripts

logger = logging.getLogger(__name__)

T = TypeVar("T")
# A step's MCP grants' tools, by grant name (those whose servers answered).
McpTools = dict[str, list[McpTool]]

_CANCEL_CHECK_S = 0.25
_COMMIT_ATTEMPTS = 5
# What run_failed says when a step failed in a way the worker did not foresee (a bug).
UNEXPECTED_FAILURE = "internal: the step failed unexpectedly; the worker logged why"


class StepCancelled(Exception):
    """A cancel was seen while the model worked."""


class StepLost(Exception):
    """The step's lease was lost (the step was reclaimed by another worker); this one stops."""


class StepWaits(Exception):
    """The step needs the person to sign in to some of its grants' servers first: it waits for these
    sign-ins (their ids) without calling the model."""

    def __init__(self, authorization_ids: tuple[str, ...]) -> None:
        super().__init__(authorization_ids)
        self.authorization_ids = authorization_ids


class _Hold:
    """Runs the model call while renewing the step's lease and watching for a cancel."""

    def __init__(self, broker: Broker, session_id: str, run_id: str, step: int, attempt: int) -> None:
        self._broker = broker
        self._ids = (session_id, run_id, step, attempt)
        self._reason: type[Exception] | None = None

    async def run(self, work: Awaitable[T]) -> T:
        task: asyncio.Task[T] = asyncio.ensure_future(work)
        watcher = asyncio.create_task(self._watch(task))
        try:
            return await task
        except asyncio.CancelledError:
            if self._reason is None:
                raise
            raise self._reason from None
        finally:
            await cancel_and_wait([watcher])

    async def _watch(self, task: asyncio.Task[Any]) -> None:
        session_id, run_id, step, attempt = self._ids
        runs = self._broker.runs
        renew_every = self._broker.settings.step_lease_s / 3
        last_renewal = time.monotonic()
        while not task.done():
            await asyncio.sleep(_CANCEL_CHECK_S)
            if await runs.cancel_requested(session_id, run_id):
                self._reason = StepCancelled
            elif time.monotonic() - last_renewal > renew_every:
                last_renewal = time.monotonic()
                if not await runs.renew(session_id, run_id, step, attempt):
                    self._reason = StepLost
            if self._reason is not None:
                task.cancel()
                return


class StepRunner:
    def __init__(
        self,
        broker: Broker[WorkerSettings],
        models: ModelRegistry,
        registry: Registry,
        hub: McpHub,
        metrics: WorkerMetrics,
        tracer: RunTracer,
        tokens: GrantTokens | None = None,
    ) -> None:
        self._broker = broker
        self._tracer = tracer
        self._models = models
        self._metrics = metrics
        self._registry = registry
        self._hub = hub
        # None without SWITCHBOARD_SECRET_KEY: no grant has a stored token then.
        self._tokens = tokens
        settings = broker.settings
        self._transcripts = Transcripts(
            broker.log.after, settings.worker_transcript_cache_mb * 2**20, settings.worker_transcript_idle_s
        )

    async def run(self, session_id: str, run_id: str, step: int, attempt: int, entry: str = "") -> None:
        """Run try `attempt` of step `step`; `entry` is the work entry that brought it."""
        try:
            await self._run(session_id, run_id, step, attempt, entry)
        except BrokerUnavailable as error:
            # Redis is out of reach: the step's lease (or, before it began, its entry's claim) lapses and
            # another try is made from the persisted log, up to the reclaim limit.
            logger.warning("step %s of run %s could not reach Redis: %s", step, run_id, error.message)
        except Exception:
            # A bug must not leave the run unfinished: it ends, and the log (never the session, which may
            # be anyone's) has the exception.
            logger.exception("step %s of run %s failed", step, run_id)
            await self._end(session_id, run_id, step, attempt, "run_failed", UNEXPECTED_FAILURE)

    async def _end(
        self,
        session_id: str,
        run_id: str,
        step: int,
        attempt: int,
        outcome: str,
        error: str = "",
        traced: StepTrace | None = None,
    ) -> None:
        await self._broker.runs.finish(session_id, run_id, step, attempt, outcome, error)
        await self._tracer.ended(traced, outcome)

    async def _run(self, session_id: str, run_id: str, step: int, attempt: int, entry: str) -> None:
        broker = self._broker
        started = time.monotonic()
        started_at_us = time.time_ns() // 1000
        failure = ""
        try:
            config: RunConfig | None = await self._models.config_for(session_id)
        except ModelError as error:
            config, failure = None, str(error)
        limit = config.max_steps if config is not None else broker.settings.max_steps
        # Begin before the model is resolved: a provider SDK's first import takes seconds, and under the
        # step's lease (renewed by _Hold) a slow import is not mistaken for a worker that died.
        trace = await self._tracer.trace_id(session_id, run_id)
        outcome = await broker.runs.begin(session_id, run_id, step, attempt, limit, entry, trace)
        if outcome != "run":
            await self._tracer.ended_as_it_began(session_id, run_id, outcome)
            return
        traced = await self._tracer.began(session_id, run_id, step)
        if config is None:
            await self._end(session_id, run_id, step, attempt, "run_failed", failure, traced)
            return
        deltas = DeltaStream(broker, session_id, run_id, step)
        try:
            turn, routed, mcp_tools = await _Hold(broker, session_id, run_id, step, attempt).run(
                self._call(session_id, run_id, config, deltas, traced)
            )
        except StepWaits as waits:
            # The run waits as on an approval, held by no worker: the sign-in's end (its callback, a decline,
            # its timer) queues this step again as its next try, for any worker.
            waited = await broker.mcp_authorizations.wait(
                session_id, run_id, step, attempt, waits.authorization_ids, RUN_GONE_CANCELLED
            )
            if waited == "cancelled":
                await self._tracer.ended(traced, "run_cancelled")
            return
        except StepCancelled:
            await self._end(session_id, run_id, step, attempt, "run_cancelled", traced=traced)
            return
        except StepLost:
            logger.warning("step %s of run %s was reclaimed from this worker; it stops", step, run_id)
            return
        except ModelError as error:
            await self._end(session_id, run_id, step, attempt, "run_failed", str(error), traced)
            return
        finally:
            await deltas.close()
        timing = {"step_ms": round((time.monotonic() - started) * 1000), "started_at_us": started_at_us}
        after_seq = await broker.log.head(session_id) if traced is not None else 0
        committed = await self._commit(
            session_id, run_id, step, attempt, turn, routed, mcp_tools, config, timing, traced
        )
        counts = turn.usage.fields() if turn.usage is not None else {}
        await self._tracer.committed(traced, routed, after_seq, counts, committed.outcome)

    async def _catalog(self, session_id: str, config: RunConfig, mcp_tools: McpTools) -> Catalog:
        return Catalog.build(
            await self._broker.runs.offered(session_id), self._registry, config, self._broker.arguments, mcp_tools
        )

    async def _call(
        self, session_id: str, run_id: str, config: RunConfig, deltas: DeltaStream, traced: StepTrace | None
    ) -> tuple[Turn, Routed, McpTools]:
        model = await self._models.model_for(session_id)
        # Once a step: a catalog built again for the commit uses these (a listing may hold the step's slot).
        grants, lacking = config.mcp, Lacking()
        if self._tokens is not None and grants:
            grants = await self._tokens.authorized(session_id, grants)
            lacking = await self._tokens.ask(session_id, run_id, grants)
        if lacking.waiting:
            raise StepWaits(lacking.waiting)
        mcp_tools = await self._hub.tools(grants) if grants else {}
        # A grant left out for want of a sign-in: the model is told why, after the agent's own prompt.
        if unlisted := {name: why for name, why in lacking.why.items() if name not in mcp_tools}:
            told = "\n\n".join(filter(None, [config.system_prompt, sign_in_note(unlisted)]))
            config = dataclasses.replace(config, system_prompt=told)
        catalog = await self._catalog(session_id, config, mcp_tools)
        transcript = await self._transcripts.read(session_id)
        settings = self._broker.settings
        request = ModelRequest(config, transcript, catalog.tools, StreamLimits.of(settings))
        scripted = traced is not None and (await self._models.billed_to(session_id))[0] == SCRIPTED_PROVIDER_ID
        with self._tracer.chat(traced, config, scripted) as span:
            # Wrapped only when traced: untraced, the deltas go straight to the stream as before.
            started, first = time.monotonic(), FirstChunk(deltas) if traced is not None else None
            sink = first or deltas
            turn: Turn = await with_retries(
                lambda: model.turn(request, sink),
                deltas,
                attempts=settings.model_attempts,
                backoff_s=settings.model_backoff_s,
                budget_s=settings.model_retry_budget_s,
            )
            self._tracer.answered(span, turn, started, first)
        # Under the step's lease: checking the calls' arguments may take a while (common/schema/).
        return turn, await catalog.routed(turn.calls), mcp_tools

    async def _commit(
        self,
        session_id: str,
        run_id: str,
        step: int,
        attempt: int,
        turn: Turn,
        routed: Routed,
        mcp_tools: McpTools,
        config: RunConfig,
        measured: dict[str, int],
        traced: StepTrace | None,
    ) -> Committed:
        payload: dict[str, object] = {"scope": "step", "run_id": run_id, "step": step, "attempt": attempt, **measured}
        counts = turn.usage.fields() if turn.usage is not None else {}
        if counts:
            # An extension: the tokens the step's model call counted, by the provider's own count.
            payload["usage"] = counts
            # Read again only if the registry let the session go during the model call; a version deleted
            # meanwhile loses its metrics count, not the step.
            with contextlib.suppress(ModelError):
                provider_id, agent_id = await self._models.billed_to(session_id)
                self._metrics.tokens(provider_id, config.model, agent_id, counts)
        timing = step_timing(payload)
        usage = dumps(counts) if counts else ""
        message = message_assistant(turn.content, turn.model)
        traceparents = self._tracer.traceparents(traced, turn)
        for _ in range(_COMMIT_ATTEMPTS):
            committed = await self._broker.runs.commit(
                session_id, run_id, step, attempt, message, routed, timing, usage, traceparents
            )
            if committed.outcome != "retry":
                return committed
            # A registration came or went since the catalog was read: route against what is there now.
            routed = await (await self._catalog(session_id, config, mcp_tools)).routed(turn.calls)
        raise BrokerUnavailable("client names kept changing while the step was committed")
