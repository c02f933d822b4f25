"""Work a script leaves for its caller: enqueue a step job or a server tool job, release a client.

Scripts record each piece in the work index (`sb:work`) as they owe it; whoever ran the script performs
it at once and takes it out of the index; the sweeper performs whatever a dead process left there.
Performing twice is harmless: job ids are derived from what they run, and releasing a client that
already left changes nothing. A job is written, taken out of the index and announced to an idle worker in
one script (`enqueue_job.lua`), so performing it costs one round trip and a worker starts it at once
rather than at its next poll.
"""

from __future__ import annotations

from typing import Any

from arq.jobs import serialize_job
from arq.utils import timestamp_ms

from broker.aio import aw
from broker.codec import job_serializer
from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.layouts import client_args, client_keys

RUN_STEP_JOB = "run_step"
RUN_TOOL_JOB = "run_tool"
# Wake tokens kept at most: enough for every idle worker of a large deployment to be woken at once.
WAKE_TOKENS = 256


class Work:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def perform(self, owed: list[str]) -> None:
        for member in owed:
            await self._perform_one(member)

    async def _perform_one(self, member: str) -> None:
        keys = self._core.keys
        kind, _, rest = member.partition("|")
        session_id, _, detail = rest.partition("|")
        if kind == "s":
            run_id, step, attempt = detail.split("|")
            job_id = keys.step_job_id(run_id, int(step), int(attempt))
            await self._enqueue(member, job_id, RUN_STEP_JOB, (session_id, run_id, int(step), int(attempt)))
        elif kind == "t":
            await self._enqueue(member, keys.tool_job_id(session_id, detail), RUN_TOOL_JOB, (session_id, detail))
        else:
            if kind == "d":
                await self._release(session_id, detail)
            with translate_redis_errors():
                await aw(self._core.redis.zrem(keys.work, member))

    async def _enqueue(self, member: str, job_id: str, function: str, args: tuple[Any, ...]) -> None:
        keys = self._core.keys
        now_ms = timestamp_ms()
        job = serialize_job(function, args, {}, None, now_ms, serializer=job_serializer)
        await self._core.scripts.raw(
            "enqueue_job",
            [keys.arq_job(job_id), keys.arq_result(job_id), keys.queue, keys.work, keys.wake],
            [job_id, job, self._core.arq.expires_extra_ms, now_ms, member, WAKE_TOKENS],
        )

    async def _release(self, session_id: str, client_id: str) -> None:
        """A run-scoped registration leaves with its run (`client_left` departed)."""
        keys = self._core.keys
        try:
            (owed,) = await self._core.scripts.run(
                "leave_client", client_keys(keys, session_id, client_id), client_args(keys, session_id, client_id)
            )
        except NotFound:
            return
        await self.perform(owed)

    async def wait_for_job(self, timeout_s: float) -> bool:
        """Block until a job is enqueued (a wake token is taken) or `timeout_s` passes; True if woken."""
        with translate_redis_errors():
            # Redis takes fractional seconds (6.0+); redis-py 5 annotates the timeout as int only.
            woken = await aw(self._core.redis.blpop([self._core.keys.wake], timeout=timeout_s))  # type: ignore[arg-type]
        return woken is not None
