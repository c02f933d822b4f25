"""A server tool call, as one work entry: take it, run the tool under a renewed lease, record the result.

The tool is the deployment's own (a Python function) or an agent's MCP server's (`mcp:<grant>`). A call
that stops running meanwhile (cancelled, or its lease lost) is stopped here too: the renewal that finds
it settled cancels the tool, which for an MCP call sends `notifications/cancelled`."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pydantic import ValidationError

from broker import Broker
from common.codec import dumps
from common.events import text_block, tool_progress
from common.tasks import cancel_and_wait
from workers.mcp.hub import McpHub
from workers.mcp.results import Mapped, failed
from workers.models.base import ModelError
from workers.models.registry import ModelRegistry
from workers.tools import Registry

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
    def __init__(self, broker: Broker, registry: Registry, hub: McpHub, models: ModelRegistry) -> None:
        self._broker = broker
        self._registry = registry
        self._hub = hub
        self._models = models

    async def run(self, session_id: str, call_id: str, entry: str = "") -> None:
        """Run server call `call_id`; `entry` is the work entry that brought it."""
        calls = self._broker.server_calls
        call = await calls.begin(session_id, call_id, entry)
        if call is None:
            return
        if call.source.startswith(MCP_SOURCE):
            work = self._mcp(session_id, call_id, call.source.removeprefix(MCP_SOURCE), call.tool, call.arguments)
        else:
            work = self._execute(call.tool, call.arguments)
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
        await calls.result_blocks(session_id, call_id, mapped.blocks, is_error=mapped.is_error)

    async def _mcp(
        self, session_id: str, call_id: str, grant_name: str, tool: str, arguments: dict[str, Any]
    ) -> Mapped:
        try:
            config = await self._models.config_for(session_id)
        except ModelError as error:
            return failed(str(error))
        grant = config.grant(grant_name)
        if grant is None:
            return failed(f"the agent's version no longer grants the MCP server {grant_name}")
        progress = _Progress(self._broker, session_id, call_id, grant_name, tool)
        try:
            return await self._hub.call(grant, tool, arguments, progress)
        finally:
            await progress.close()

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

    async def _renew(self, session_id: str, call_id: str, task: asyncio.Future[Mapped]) -> None:
        while True:
            # A third of the lease: two renewals may fail before the call is taken for interrupted.
            await asyncio.sleep(self._broker.settings.server_call_lease_s / 3)
            if not await self._broker.server_calls.renew(session_id, call_id):
                task.cancel()
                return
