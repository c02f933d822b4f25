"""A server tool call, as one work entry: take it, run the tool under a renewed lease, record the result.

The tool is the deployment's own (a Python function) or an agent's MCP server's (`mcp:<grant>`). The
deployment's own tool runs in the job's slot; an MCP call, once begun, runs beside the jobs
(workers/mcp/calls.py), so a slow server holds no slot. A call that stops running meanwhile (cancelled,
or its lease lost) is stopped here too: the renewal that finds it settled cancels the tool, which for an
MCP call ends its request at the server."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any

from pydantic import ValidationError

from broker import Broker
from broker.services.server_calls import ServerCall, TaskCancel
from common.codec import dumps
from common.events.build import text_block, tool_progress
from common.tasks import cancel_and_wait
from common.tracing import Tracing
from workers.mcp.calls import McpCalls
from workers.mcp.grant_tokens import GrantTokens
from workers.mcp.hub import McpHub
from workers.mcp.mapped import Mapped, failed
from workers.mcp.parking import GrantTurns
from workers.models.base import ModelError
from workers.models.registry import ModelRegistry
from workers.tools import Registry
from workers.tracing import call_traceparent

logger = logging.getLogger(__name__)

MCP_SOURCE = "mcp:"
# An MCP server may report progress as often as it likes; the log keeps one event per this interval per
# call, the newest, so a chatty server cannot fill a session's log.
PROGRESS_EVERY_S = 0.5


class _Progress:
    """An MCP call's progress notifications as `tool_progress` events, at most one per interval."""

    def __init__(self, broker: Broker, session_id: str, call_id: str, server: str, tool: str) -> None:
        self._broker, self._ids = broker, (session_id, call_id, server, tool)
        self._last = 0.0
        self._pending: tuple[str | None, float | None] | None = None
        self._flush: asyncio.Task[None] | None = None

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        fraction = min(1.0, max(0.0, progress / total)) if total else None
        self._pending = (message[:1000] if message else None, fraction)
        wait = self._last + PROGRESS_EVERY_S - time.monotonic()
        if wait <= 0:
            await self._write()
        elif self._flush is None or self._flush.done():
            self._flush = asyncio.create_task(self._later(wait))

    async def _later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        await self._write()

    async def _write(self) -> None:
        if self._pending is None:
            return
        (message, fraction), self._pending = self._pending, None
        self._last = time.monotonic()
        session_id, call_id, server, tool = self._ids
        event = tool_progress(call_id, server, tool, message, fraction)
        await self._broker.server_calls.progress(session_id, call_id, event)

    async def close(self) -> None:
        if self._flush is not None:
            await cancel_and_wait([self._flush])


class ServerToolRunner:
    def __init__(
        self,
        broker: Broker,
        registry: Registry,
        hub: McpHub,
        models: ModelRegistry,
        mcp_calls: McpCalls,
        tracing: Tracing | None = None,
        tokens: GrantTokens | None = None,
    ) -> None:
        self._broker = broker
        self._tracing = tracing or Tracing()
        self._registry = registry
        self._hub = hub
        self._models = models
        self._mcp_calls = mcp_calls
        self._tokens = tokens
        self._turns = GrantTurns(broker, hub)

    async def run(self, session_id: str, call_id: str, entry: str = "") -> None:
        """Run server call `call_id`; `entry` is the work entry that brought it. An MCP call is handed to
        the MCP calls once begun, and this returns (its job's slot free)."""
        calls = self._broker.server_calls
        call = await calls.begin(session_id, call_id, entry)
        if call is None:
            return
        if isinstance(call, TaskCancel):
            if self._mcp_calls.full:
                # A courtesy to the server, as its answer is: the call is settled already.
                logger.warning("the cancel of task %s at its MCP server is not sent: this worker is full", call.task_id)
                return
            cancel = self._cancel_task(session_id, call.source.removeprefix(MCP_SOURCE), call.task_id)
            self._mcp_calls.start(cancel, f"mcp-cancel-{call_id}")
            return
        if not call.source.startswith(MCP_SOURCE):
            await self._supervised(session_id, call_id, self._execute(call.tool, call.arguments))
            return
        if self._mcp_calls.full:
            self._mcp_calls.refused()
            limit = self._mcp_calls.per_worker
            refused = failed(
                f"this worker holds {limit} MCP calls already (SWITCHBOARD_MCP_CALLS_PER_WORKER={limit});"
                " try the call again later"
            )
            await calls.result_blocks(session_id, call_id, refused.blocks, is_error=True)
            return
        work = self._mcp(session_id, call_id, call)
        self._mcp_calls.start(self._supervised(session_id, call_id, work), f"mcp-call-{call_id}")

    async def _supervised(self, session_id: str, call_id: str, work: Coroutine[Any, Any, Mapped | None]) -> None:
        """Run `work` under the call's renewed lease and record what it gives (None: it parked the call)."""
        calls = self._broker.server_calls
        task = asyncio.ensure_future(work)
        renewal = asyncio.create_task(self._renew(session_id, call_id, task))
        try:
            mapped = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            return  # the renewal found it settled (cancelled, or taken for interrupted): nothing to record
        finally:
            await cancel_and_wait([renewal])
        if mapped is None:
            return
        await calls.result_blocks(
            session_id, call_id, mapped.blocks, is_error=mapped.is_error, structured=mapped.structured
        )

    async def _mcp(self, session_id: str, call_id: str, call: ServerCall) -> Mapped | None:
        grant_name, tool = call.source.removeprefix(MCP_SOURCE), call.tool
        try:
            config = await self._models.config_for(session_id)
        except ModelError as error:
            return failed(str(error))
        grant = config.grant(grant_name)
        if grant is None:
            return failed(f"the agent's version no longer grants the MCP server {grant_name}")
        if self._tokens is not None:
            (grant,) = await self._tokens.authorized(session_id, (grant,))
        # The call's whole time, its wait for a turn at the server and its parked turns included, is the
        # grant's timeout_s (what is left of it is kept with the call once it parks).
        left_s = grant.timeout_s if call.left_s is None else call.left_s
        deadline = asyncio.get_running_loop().time() + left_s
        progress = _Progress(self._broker, session_id, call_id, grant_name, tool)
        try:
            async with self._mcp_calls.turn(self._hub.key(grant), deadline) as turn:
                if not turn:
                    per_grant = self._mcp_calls.per_grant
                    return failed(
                        f"the MCP tool {tool} of {grant_name} did not start within {grant.timeout_s:g} s: its"
                        f" server had {per_grant} calls running on this worker (SWITCHBOARD_MCP_CALLS_PER_GRANT)"
                    )
                traceparent = await call_traceparent(self._tracing, self._broker, session_id, call_id)
                return await self._turns.run(session_id, call_id, grant, call, progress, deadline, traceparent)
        finally:
            await progress.close()

    async def _cancel_task(self, session_id: str, grant_name: str, task_id: str) -> None:
        try:
            config = await self._models.config_for(session_id)
        except ModelError:
            return
        grant = config.grant(grant_name)
        if grant is not None and self._tokens is not None:
            (grant,) = await self._tokens.authorized(session_id, (grant,))
        if grant is not None:
            await self._turns.cancel(grant, task_id)

    async def _execute(self, name: str, arguments: dict[str, Any]) -> Mapped:
        tool = self._registry.get(name)
        if tool is None:
            return failed(f"no server tool named {name} is available")
        try:
            args = tool.parameters.model_validate(arguments)
        except ValidationError as error:
            # Field and rule, not pydantic's text, which names the tool's arguments class.
            problems = "; ".join(
                f"{'.'.join(map(str, problem['loc'])) or 'arguments'}: {problem['msg']}"
                for problem in error.errors()[:3]
            )
            return failed(f"the arguments were not valid: {problems}")
        try:
            result = await asyncio.wait_for(tool.run(args), tool.timeout_s)
        except TimeoutError:
            return failed(f"the tool {name} did not finish within {tool.timeout_s:g} s")
        except ValueError as error:
            # How a server tool says what is wrong with what it was asked.
            logger.info("server tool %s failed: %r", name, error)
            return failed(str(error) or f"the tool {name} failed")
        except Exception:
            logger.exception("server tool %s failed unexpectedly", name)
            return failed(f"the tool {name} failed unexpectedly; the worker logged why")
        return Mapped([text_block(result if isinstance(result, str) else dumps(result))], False)

    async def drain(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the MCP calls running beside the jobs (then they are cancelled)."""
        await self._mcp_calls.drain(timeout_s)

    async def _renew(self, session_id: str, call_id: str, task: asyncio.Future[Mapped | None]) -> None:
        while True:
            # A third of the lease: two renewals may fail before the call is taken for interrupted.
            await asyncio.sleep(self._broker.settings.server_call_lease_s / 3)
            if not await self._broker.server_calls.renew(session_id, call_id):
                task.cancel()
                return
