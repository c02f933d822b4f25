"""One model step of a run, as one arq job: begin, call the model, commit; never wait on a client."""

from __future__ import annotations

import logging
from typing import Any

from arq import Retry

from broker import Broker
from broker.errors import BrokerUnavailable
from workers.models.base import ModelError, StepCancelled
from workers.models.registry import ModelRegistry
from workers.transcript import read_transcript

logger = logging.getLogger(__name__)

# arq tries a step this many times; the last try that still cannot reach Redis fails the run rather than
# leave it unfinished.
MAX_TRIES = 5


class StepRunner:
    def __init__(self, broker: Broker, models: ModelRegistry) -> None:
        self._broker = broker
        self._models = models

    async def run(self, session_id: str, run_id: str, step: int, job_try: int) -> None:
        try:
            await self._run(session_id, run_id, step)
        except BrokerUnavailable as error:
            if job_try >= MAX_TRIES:
                logger.error("step %s of run %s gave up: %s", step, run_id, error)
                await self._broker.runs.finish(session_id, run_id, step, "run_failed", f"internal: {error.message}")
                return
            raise Retry(defer=min(2**job_try * 0.25, 5)) from error
        except Exception as error:
            # A bug must not leave the run unfinished: it ends, and the log says why.
            logger.exception("step %s of run %s failed", step, run_id)
            await self._broker.runs.finish(session_id, run_id, step, "run_failed", f"internal: {error!r}")

    async def _run(self, session_id: str, run_id: str, step: int) -> None:
        runs = self._broker.runs
        if await runs.begin(session_id, run_id, step) != "run":
            return

        async def checkpoint() -> None:
            if await runs.cancel_requested(session_id, run_id):
                raise StepCancelled

        try:
            model = await self._models.for_session(session_id)
            transcript = await read_transcript(self._broker, session_id)
            turn = await model.turn(transcript, checkpoint)
        except StepCancelled:
            await runs.finish(session_id, run_id, step, "run_cancelled")
            return
        except ModelError as error:
            await runs.finish(session_id, run_id, step, "run_failed", str(error))
            return
        committed = await runs.commit(session_id, run_id, step, turn.content, turn.model, turn.calls)
        await runs.enqueue(committed.scheduled)


async def run_step(ctx: dict[str, Any], session_id: str, run_id: str, step: int) -> None:
    """The arq job: step `step` of run `run_id` in session `session_id`."""
    runner: StepRunner = ctx["steps"]
    await runner.run(session_id, run_id, step, int(ctx.get("job_try", 1)))
