"""One member of a tool server's pool: reads the calls handed to it, acks, runs the tool, answers.

A member holds at most `concurrency` calls at once. A call handed over while every slot is busy is left
unacked, so another member reclaims it after the claim interval: a busy member never sits on work a free
one could do. On stop, the member closes its stream at once (calls it was handed but had not acked go to
other members) and finishes the calls it acked before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from switchboard.tool_log import detail, duration
from switchboard.typed_tools import Call, TypedTool

logger = logging.getLogger("switchboard.tools")
MEMBER_HEADER = "Switchboard-Pool-Member"
# What became of a call a member acked: its result went in (ok, or error: the tool's error result), it
# failed while the tool ran (cancelled, timed out, its run gone), or its result did not go in.
OK, ERROR, CANCELLED, REFUSED, UNDELIVERED = "ok", "error", "cancelled", "refused", "undelivered"


@dataclass(frozen=True)
class Target:
    """The registration a pool serves, and how to reach it."""

    url: str
    session_id: str
    token: str
    client_id: str

    @property
    def path(self) -> str:
        return f"/v1/sessions/{self.session_id}/clients/{self.client_id}"

    def http(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=httpx.Timeout(30.0, read=None))


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON `data` of each frame of an event stream (comments, ids and retry hints skipped)."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield json.loads("\n".join(data))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


class Member:
    def __init__(self, target: Target, tools: Mapping[str, TypedTool], concurrency: int) -> None:
        self._target = target
        self._tools = tools
        self._concurrency = concurrency
        self._slots = asyncio.Semaphore(concurrency)
        self._running: set[asyncio.Task[None]] = set()
        # The calls this member acked and runs, so a failure of one (its frame on the stream) stops it.
        self._calls: dict[str, tuple[Call, asyncio.Task[None]]] = {}
        self._reports: set[asyncio.Task[None]] = set()
        self.answered = 0
        self.cancelled = 0
        # Set once asked to stop: the calls that end from then on were drained.
        self._draining = False
        self.drained = 0

    async def serve(self, stop: asyncio.Event) -> None:
        """Serve until `stop` is set or the registration is gone; then finish what was acked."""
        async with self._target.http() as http:
            reading = asyncio.create_task(self._read(http))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait([reading, stopping], return_when=asyncio.FIRST_COMPLETED)
            self._draining = True
            reading.cancel()
            stopping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
            if self._running:
                await asyncio.gather(*self._running, return_exceptions=True)
            # Progress still on its way is of calls that are over: not sent on a client about to close.
            for report in self._reports:
                report.cancel()
            if self._reports:
                await asyncio.gather(*self._reports, return_exceptions=True)

    async def _read(self, http: httpx.AsyncClient) -> None:
        delay = 0.2
        while True:
            try:
                # Handed no more than it can run, so calls it could not start go to free members.
                params = {"prefetch": str(self._concurrency)}
                async with http.stream("GET", f"{self._target.path}/calls/stream", params=params) as stream:
                    if stream.status_code == 404:
                        logger.info("the registration is gone; this member stops")
                        return
                    stream.raise_for_status()
                    member = stream.headers[MEMBER_HEADER]
                    delay = 0.2
                    async for event in sse_events(stream):
                        if event.get("type") == "client_tool_failed":
                            self._stop_call(str(event.get("call_id")))
                            continue
                        await self._slots.acquire()
                        task = asyncio.create_task(self._handle(http, member, event))
                        self._running.add(task)
                        task.add_done_callback(self._done)
            except (httpx.TransportError, httpx.HTTPStatusError) as error:
                logger.warning("call stream: %s; reconnecting in %.1f s", error, delay)
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 10.0)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._slots.release()

    def _stop_call(self, call_id: str) -> None:
        running = self._calls.get(call_id)
        if running is None:
            return
        call, task = running
        call.cancel()
        # An async tool stops at its next await; a sync one runs on in its thread and can read the flag.
        task.cancel()

    def _reporter(self, http: httpx.AsyncClient, path: str) -> Callable[[str | None, float | None], None]:
        loop = asyncio.get_running_loop()

        def send(message: str | None, fraction: float | None) -> None:
            task = loop.create_task(self._report(http, path, message, fraction))
            self._reports.add(task)
            task.add_done_callback(self._reports.discard)

        def report(message: str | None, fraction: float | None) -> None:
            # From the loop or from a sync tool's thread alike.
            loop.call_soon_threadsafe(send, message, fraction)

        return report

    async def _report(self, http: httpx.AsyncClient, path: str, message: str | None, fraction: float | None) -> None:
        body = {key: value for key, value in (("message", message), ("fraction", fraction)) if value is not None}
        try:
            sent = await _post(http, path, json=body, attempts=2)
        except httpx.TransportError as error:
            logger.warning("progress %s not sent: %s", path, error)
            return
        if sent.status_code != 200:
            logger.info("progress %s refused: %s", path, sent.text)

    async def _handle(self, http: httpx.AsyncClient, member: str, event: dict[str, Any]) -> None:
        call_id = event["call_id"]
        calls = f"{self._target.path}/calls/{call_id}"
        if not await self._ack(http, f"{calls}/ack", call_id, member):
            return
        started = time.monotonic()
        name = str(event["tool"])
        ran = await self._run(http, calls, call_id, name, event.get("arguments") or {})
        said: str | None
        if ran is None:
            self.cancelled += 1
            outcome, said = CANCELLED, "the call failed while it ran"
        else:
            outcome, said = await self._answer(http, f"{calls}/result", *ran)
        self._said(name, call_id, outcome, time.monotonic() - started, said)

    async def _ack(self, http: httpx.AsyncClient, path: str, call_id: str, member: str) -> bool:
        try:
            acked = await _post(http, path, headers={MEMBER_HEADER: member})
        except httpx.TransportError as error:
            # Unacked, the call goes to another member after the claim interval.
            logger.warning("ack of call %s failed: %s", call_id, error)
            return False
        if acked.status_code != 200:
            # Handed to another member meanwhile, or settled: not ours to run, and its line is theirs.
            logger.debug("call %s not taken: %s", call_id, acked.text)
            return False
        return True

    async def _run(
        self, http: httpx.AsyncClient, calls: str, call_id: str, name: str, arguments: dict[str, Any]
    ) -> tuple[str, bool] | None:
        """The tool's result text and whether it is an error; None if the call failed while it ran."""
        tool = self._tools.get(name)
        call = Call(call_id, self._reporter(http, f"{calls}/progress"))
        current = asyncio.current_task()
        assert current is not None
        self._calls[call_id] = (call, current)
        try:
            if tool is None:
                return f"this server has no tool {name!r}", True
            return await tool.run(arguments, call)
        except asyncio.CancelledError:
            if not call.cancelled:
                raise
            # The call failed while it ran: no one waits for its result any more.
            return None
        finally:
            del self._calls[call_id]

    async def _answer(self, http: httpx.AsyncClient, path: str, text: str, is_error: bool) -> tuple[str, str | None]:
        """The call's outcome once its result is sent, and what to say of it."""
        try:
            answered = await _post(http, path, json={"text": text, "is_error": is_error})
        except httpx.TransportError as error:
            return UNDELIVERED, f"the result could not be delivered: {error}"
        if answered.status_code != 204:
            return REFUSED, f"the result was refused ({answered.status_code}): {answered.text}"
        self.answered += 1
        return (ERROR, text) if is_error else (OK, None)

    def _said(self, tool: str, call_id: str, outcome: str, seconds: float, said: str | None) -> None:
        """The one line a call gets, whatever became of it."""
        if self._draining:
            self.drained += 1
        preposition = "in" if outcome in (OK, ERROR) else "after"
        message = f"call {tool}: {outcome} {preposition} {duration(seconds)} (call {call_id})"
        fields = {"event": "call", "tool": tool, "outcome": outcome, "duration_ms": round(seconds * 1000, 1)}
        fields |= {"call_id": call_id} | ({"detail": said} if said else {})
        level = logging.WARNING if outcome in (REFUSED, UNDELIVERED) else logging.INFO
        logger.log(level, "%s%s", message, f": {detail(said)}" if said else "", extra=fields)


async def _post(http: httpx.AsyncClient, path: str, attempts: int = 5, **kwargs: Any) -> httpx.Response:
    """POST, retried on a lost connection under one Idempotency-Key, so a retry never acts twice."""
    headers = {"Idempotency-Key": str(uuid.uuid4()), **kwargs.pop("headers", {})}
    for attempt in range(attempts):
        try:
            return await http.post(path, headers=headers, **kwargs)
        except httpx.TransportError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")
