"""One turn of a grant's call that its server answers with a task or a request for input, and the call
parked in Redis between turns, so no worker holds it while the server works or a person answers.

A turn is what a worker does when it takes the call up (workers/server_tools.py): the first `tools/call`;
a `tasks/get` of the task it follows; or the `tools/call` retried with the person's answers
(`inputResponses`) and the server's `requestState`. What comes back settles the call (a result, or an
error saying why), or parks it again: until the task's next poll (the server's interval,
workers/mcp/tasks.py), or until the person has answered every request of the round (the session's input
requests, workers/mcp/asking.py). Its record keeps what the next turn needs (the task id, the round's keys
and request ids, the requestState) and the end of its grant's `timeout_s`, so any worker takes the next
turn, and a worker that stops between turns loses nothing; one that stops during a turn leaves the call to
be taken up again when its lease lapses (broker/scripts/lua/expire_call.lua).

A task still working at the end of the call's time is cancelled at its server (`tasks/cancel`) and the call
fails saying so; so is one whose call is cancelled (the session's cancel route, the run's), by the worker
that takes up the cancel owed (broker/scripts/lua/lib/calls.lua sb_fail_call)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from broker import Broker
from broker.errors import Conflict
from broker.services.server_calls import ServerCall
from workers.config import McpGrant
from workers.mcp import asking
from workers.mcp.hub import McpHub
from workers.mcp.mapped import Interim, Mapped, Working, failed

if TYPE_CHECKING:
    from workers.mcp.connection import Progress

logger = logging.getLogger(__name__)


class GrantTurns:
    def __init__(self, broker: Broker, hub: McpHub) -> None:
        self._broker = broker
        self._hub = hub

    async def run(
        self,
        session_id: str,
        call_id: str,
        grant: McpGrant,
        call: ServerCall,
        progress: Progress,
        deadline: float,
        traceparent: str = "",
    ) -> Mapped | None:
        """Take one turn of the call by `deadline` (loop time: the end of its time): its result, or None when
        it is parked (or no longer this worker's). `traceparent`: the call's span, when traced."""
        parked = call.parked or {}
        loop = asyncio.get_running_loop()
        task = parked.get("task")
        if isinstance(task, str):
            if loop.time() >= deadline:
                return await self._too_late(grant, task)
            outcome: Mapped | Interim | Working = await self._hub.poll(grant, task, None, deadline)
            return await self._next(session_id, call_id, grant, outcome, parked, deadline)
        if parked.get("ids") and loop.time() >= deadline:
            return failed(f"the MCP tool {call.tool} of {grant.name} did not finish within {grant.timeout_s:g} s:"
                          " its server's questions were not all answered in time")  # fmt: skip
        answers = await self._answers(session_id, parked) if parked.get("ids") else None
        state = parked.get("rs") if isinstance(parked.get("rs"), str) else None
        rounds = int(parked.get("n") or 0)
        from workers.mcp.live_asks import Asker

        # An older server asks on the session while it holds the call open: answered by this call's task.
        asker = Asker(self._broker.inputs, session_id, call_id, grant.name, deadline)
        for _ in range(asking.MAX_ROUNDS):
            retry = (answers or {}, state) if answers is not None or state is not None else None
            outcome = await self._hub.call(
                grant, call.tool, call.arguments, progress, deadline, retry, traceparent, asker
            )
            if isinstance(outcome, Interim) and outcome.asks:
                read = asking.read_round(outcome.body, rounds)
                if isinstance(read, asking.Round) and not read.asked:
                    # Only a requestState: the server wants the call again at once, with nothing to answer.
                    answers, state, rounds = {}, read.state, rounds + 1
                    continue
            return await self._next(session_id, call_id, grant, outcome, parked, deadline, rounds)
        return self._asked_failed(grant, f"it asked for input more than {asking.MAX_ROUNDS} times in one call")

    async def _next(
        self,
        session_id: str,
        call_id: str,
        grant: McpGrant,
        outcome: Mapped | Interim | Working,
        parked: dict[str, Any],
        deadline: float,
        rounds: int = 0,
    ) -> Mapped | None:
        """The call's result, or None once parked again."""
        if isinstance(outcome, Mapped):
            return outcome
        left_s = deadline - asyncio.get_running_loop().time()
        if isinstance(outcome, Interim) and outcome.asks:
            read = asking.read_round(outcome.body, rounds)
            if isinstance(read, str):
                return self._asked_failed(grant, read)
            if not read.asked:
                return self._asked_failed(grant, f"it asked again with nothing to answer {asking.MAX_ROUNDS} times")
            try:
                await self._broker.inputs.ask_grant(session_id, call_id, grant.name, read.asked, read.state, left_s)
            except Conflict as full:
                return failed(f"the MCP server of {grant.name} asked for input, which was not kept: {full.message}")
            return None
        if isinstance(outcome, Interim):
            from workers.mcp import tasks

            task = tasks.task_id(outcome.body)
            if not isinstance(task, str):
                return self._mapped(task)
            outcome = await self._hub.poll(grant, task, outcome.body, deadline)
            if isinstance(outcome, Mapped):
                return outcome
        if not await self._broker.server_calls.park(
            session_id, call_id, outcome.task_id, wake_s=outcome.poll_s, left_s=left_s
        ):
            # Settled meanwhile (cancelled) before the record knew of the task: nobody else will cancel it.
            await self._hub.cancel_task(grant, outcome.task_id)
        return None

    async def _answers(self, session_id: str, parked: dict[str, Any]) -> dict[str, Any]:
        keys, ids = list(parked.get("keys") or []), list(parked.get("ids") or [])
        return asking.responses(keys, await self._broker.inputs.answers(session_id, ids))

    async def _too_late(self, grant: McpGrant, task: str) -> Mapped:
        from workers.mcp import tasks

        await self._hub.cancel_task(grant, task)
        return self._mapped(tasks.too_late(grant.timeout_s))

    @staticmethod
    def _mapped(result: Any) -> Mapped:
        from workers.mcp.results import map_result

        return map_result(result)

    @staticmethod
    def _asked_failed(grant: McpGrant, why: str) -> Mapped:
        return failed(f"the MCP server of {grant.name} asked for input a grant cannot give: {why}")

    async def cancel(self, grant: McpGrant, task: str) -> None:
        """Cancel the task at the grant's server (its call settled without the worker that followed it)."""
        await self._hub.cancel_task(grant, task)
