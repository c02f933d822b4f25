"""Work a script leaves for its caller: enqueue a step job or a server tool job, release a client.

Scripts record each piece in the work index (`sb:work`) as they owe it; whoever ran the script performs
it at once and takes it out of the index; the sweeper performs whatever a dead process left there.
Performing twice is harmless: job ids are derived from what they run, and releasing a client that
already left changes nothing.
"""

from __future__ import annotations

from broker.aio import aw
from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.layouts import client_args, client_keys

RUN_STEP_JOB = "run_step"
RUN_TOOL_JOB = "run_tool"


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
        with translate_redis_errors():
            if kind == "s":
                run_id, step, attempt = detail.split("|")
                job_id = keys.step_job_id(run_id, int(step), int(attempt))
                await self._core.arq.enqueue_job(
                    RUN_STEP_JOB, session_id, run_id, int(step), int(attempt), _job_id=job_id
                )
            elif kind == "t":
                await self._core.arq.enqueue_job(
                    RUN_TOOL_JOB, session_id, detail, _job_id=keys.tool_job_id(session_id, detail)
                )
        if kind == "d":
            await self._release(session_id, detail)
        with translate_redis_errors():
            await aw(self._core.redis.zrem(keys.work, member))

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
