"""A server tool call, as one work entry: take it, run the tool under a renewed lease, record the result."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import ValidationError

from broker import Broker
from broker.codec import dumps
from broker.tasks import cancel_and_wait
from workers.tools import Registry

logger = logging.getLogger(__name__)


class ServerToolRunner:
    def __init__(self, broker: Broker, registry: Registry) -> None:
        self._broker = broker
        self._registry = registry

    async def run(self, session_id: str, call_id: str, entry: str = "") -> None:
        """Run server call `call_id`; `entry` is the work entry that brought it."""
        calls = self._broker.server_calls
        call = await calls.begin(session_id, call_id, entry)
        if call is None:
            return
        renewal = asyncio.create_task(self._renew(session_id, call_id))
        try:
            text, is_error = await self._execute(call.tool, call.arguments)
        finally:
            await cancel_and_wait([renewal])
        await calls.result(session_id, call_id, text, is_error=is_error)

    async def _execute(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        tool = self._registry.get(name)
        if tool is None:
            return f"no server tool named {name} is available", True
        try:
            args = tool.parameters.model_validate(arguments)
        except ValidationError as error:
            return f"the arguments were not valid: {error}", True
        try:
            result = await asyncio.wait_for(tool.run(args), tool.timeout_s)
        except TimeoutError:
            return f"the tool {name} did not finish within {tool.timeout_s:g} s", True
        except Exception as error:
            logger.info("server tool %s failed: %r", name, error)
            return str(error) or f"the tool {name} failed", True
        return (result if isinstance(result, str) else dumps(result)), False

    async def _renew(self, session_id: str, call_id: str) -> None:
        renewed = True
        while renewed:
            # A third of the lease: two renewals may fail before the call is taken for interrupted.
            await asyncio.sleep(self._broker.settings.server_call_lease_s / 3)
            renewed = await self._broker.server_calls.renew(session_id, call_id)
