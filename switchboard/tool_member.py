"""One member of a tool server's pool: reads the calls handed to it, acks, runs the tool, answers.

What runs a call is a `Runner`: `switchboard tools serve`'s typed tools (`typed_runner`), or the bridge to
an MCP server (`switchboard tools mcp`).

A member holds at most `concurrency` calls at once. A call handed over while every slot is busy is left
unacked, so another member reclaims it after the claim interval: a busy member never sits on work a free
one could do. On stop, the member closes its stream at once (calls it was handed but had not acked go to
other members) and finishes the calls it acked before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from common.events.catalogue import ClientToolDispatched, ClientToolFailed, InputProvided
from common.events.read import decode_known
from switchboard.tool_ask import Ask, AskRefused, InputAnswer, OpenRequests
from switchboard.tool_log import detail, duration
from switchboard.tool_spans import client_span
from switchboard.typed_tools import Call, TypedTool

logger = logging.getLogger("switchboard.tools")
MEMBER_HEADER = "Switchboard-Pool-Member"
# What became of a call a member acked: its result went in (ok, or error: the tool's error result), it
# failed while the tool ran (cancelled, timed out, its run gone), or its result did not go in.
OK, ERROR, CANCELLED, REFUSED, UNDELIVERED = "ok", "error", "cancelled", "refused", "undelivered"
FAILED_WHILE_RUNNING = "the call failed while it ran"

Runner = Callable[[str, dict[str, Any], Call], Awaitable[tuple[dict[str, Any], bool]]]
"""Runs a call (tool name, arguments, the call): the result route's body and whether it is an error. A
call that fails while it runs cancels the task awaiting it."""


def typed_runner(tools: Mapping[str, TypedTool]) -> Runner:
    """A runner of typed tools by name; their result text is the body's `text`."""

    async def run(name: str, arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        tool = tools.get(name)
        if tool is None:
            text, is_error = f"this server has no tool {name!r}", True
        else:
            text, is_error = await tool.run(arguments, call)
        return {"text": text, "is_error": is_error}, is_error

    return run


def said_of(body: dict[str, Any]) -> str:
    """A result body's text, for its call's line: `text`, or the text of its `content` blocks."""
    if "text" in body:
        return str(body["text"])
    return "\n".join(str(block["text"]) for block in body.get("content") or () if block.get("type") == "text")


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

    def http(self) -> httpx2.AsyncClient:
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx2.AsyncClient(base_url=self.url, headers=headers, timeout=httpx2.Timeout(30.0, read=None))


class Member:
    """Serves a registration's calls with `tools`: typed tools by name, or a runner."""

    def __init__(self, target: Target, tools: Mapping[str, TypedTool] | Runner, concurrency: int) -> None:
        self._target = target
        self._runner = typed_runner(tools) if isinstance(tools, Mapping) else tools
        self._concurrency = concurrency
        self._slots = asyncio.Semaphore(concurrency)
        self._running: set[asyncio.Task[None]] = set()
        # The calls this member acked and runs, so a failure of one (its frame on the stream) stops it.
        self._calls: dict[str, tuple[Call, asyncio.Task[None]]] = {}
        # Why a call this member stopped itself was stopped, for its line (a failure's, unless here).
        self._stopped_why: dict[str, str] = {}
        self._reports: set[asyncio.Task[None]] = set()
        # The input requests its calls made, waiting for their answers.
        self._answers = OpenRequests()
        self.answered = 0
        self.cancelled = 0
        # Set once asked to stop: the calls that end from then on were drained.
        self._draining = False
        self.drained = 0

    async def serve(self, stop: asyncio.Event, drain_s: float | None = None) -> None:
        """Serve until `stop` is set or the registration is gone; then finish what was acked (within
        `drain_s`, if given: calls still running then are stopped as a failed call is)."""
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
                await self._finish(drain_s)
            # Progress still on its way is of calls that are over: not sent on a client about to close.
            for report in self._reports:
                report.cancel()
            if self._reports:
                await asyncio.gather(*self._reports, return_exceptions=True)

    async def _read(self, http: httpx2.AsyncClient) -> None:
        delay = 0.2
        while True:
            try:
                # Handed no more than it can run, so calls it could not start go to free members.
                params = {"prefetch": str(self._concurrency)}
                # No bound on an event's size: the server's settings bound a call's arguments, and a
                # client cannot know them.
                async with http.sse(f"{self._target.path}/calls/stream", params=params, max_event_size=None) as source:
                    stream = source.response
                    if stream.status_code == 404:
                        logger.info("the registration is gone; this member stops")
                        return
                    stream.raise_for_status()
                    member = stream.headers[MEMBER_HEADER]
                    delay = 0.2
                    async for frame in source:
                        # A call stream's frames are its calls and their failures (api/pool_stream.py).
                        event = decode_known(frame.data) if frame.data else None
                        if isinstance(event, ClientToolFailed):
                            self._stop_call(event.call_id)
                        elif isinstance(event, InputProvided):
                            self._answers.heard(event)
                        if not isinstance(event, ClientToolDispatched):
                            continue
                        await self._slots.acquire()
                        task = asyncio.create_task(self._handle(http, member, event))
                        self._running.add(task)
                        task.add_done_callback(self._done)
            except (httpx2.TransportError, httpx2.HTTPStatusError) as error:
                logger.warning("call stream: %s; reconnecting in %.1f s", error, delay)
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 10.0)

    async def _finish(self, drain_s: float | None) -> None:
        running = list(self._running)
        _, late = await asyncio.wait(running, timeout=drain_s)
        if late:
            for call_id in list(self._calls):
                self._stop_call(call_id, f"still running after the {drain_s:g} s given to finish on stop")
        await asyncio.gather(*running, return_exceptions=True)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._slots.release()

    def _stop_call(self, call_id: str, why: str | None = None) -> None:
        running = self._calls.get(call_id)
        if running is None:
            return
        if why is not None:
            self._stopped_why[call_id] = why
        call, task = running
        call.cancel()
        # An async tool stops at its next await; a sync one runs on in its thread and can read the flag.
        task.cancel()

    def _reporter(
        self, http: httpx2.AsyncClient, path: str, headers: dict[str, str]
    ) -> Callable[[str | None, float | None], None]:
        loop = asyncio.get_running_loop()

        def send(message: str | None, fraction: float | None) -> None:
            task = loop.create_task(self._report(http, path, headers, message, fraction))
            self._reports.add(task)
            task.add_done_callback(self._reports.discard)

        def report(message: str | None, fraction: float | None) -> None:
            # From the loop or from a sync tool's thread alike.
            loop.call_soon_threadsafe(send, message, fraction)

        return report

    async def _report(
        self, http: httpx2.AsyncClient, path: str, headers: dict[str, str], message: str | None, fraction: float | None
    ) -> None:
        body = {key: value for key, value in (("message", message), ("fraction", fraction)) if value is not None}
        try:
            sent = await _post(http, path, json=body, attempts=2, headers=headers)
        except httpx2.TransportError as error:
            logger.warning("progress %s not sent: %s", path, error)
            return
        if sent.status_code != 200:
            logger.info("progress %s refused: %s", path, sent.text)

    def _asker(self, http: httpx2.AsyncClient, calls: str) -> Ask:
        async def ask(body: dict[str, Any]) -> InputAnswer:
            try:
                asked = await _post(http, f"{calls}/input-requests", json=body, attempts=3)
            except httpx2.TransportError as error:
                raise AskRefused(0, f"the input request could not be sent: {error}") from None
            if asked.status_code != 201:
                raise AskRefused(asked.status_code, _message_of(asked))
            request_id = str(asked.json()["request_id"])
            read_path = f"/v1/sessions/{self._target.session_id}/input-requests/{request_id}"
            return await self._answers.wait(http, read_path, request_id)

        return ask

    async def _handle(self, http: httpx2.AsyncClient, member: str, event: ClientToolDispatched) -> None:
        call_id = event.call_id
        calls = f"{self._target.path}/calls/{call_id}"
        # A traced deployment's call span: the answers' request spans are made its children, or children of
        # this process's own span of the call when it traces (switchboard/tool_spans.py).
        dispatched = event.traceparent if isinstance(event.traceparent, str) else None
        with client_span(dispatched, event.tool, call_id) as span:
            trace = span.traceparent
            traced = {"traceparent": trace} if trace else {}
            if not await self._ack(http, f"{calls}/ack", call_id, {MEMBER_HEADER: member, **traced}):
                return
            started = time.monotonic()
            name = event.tool
            ran = await self._run(http, calls, call_id, name, event.arguments, trace)
            said: str | None
            if ran is None:
                self.cancelled += 1
                outcome, said = CANCELLED, self._stopped_why.pop(call_id, FAILED_WHILE_RUNNING)
            else:
                outcome, said = await self._answer(http, f"{calls}/result", *ran, traced)
            if outcome != OK:
                span.fail("tool_error" if outcome == ERROR else outcome)
        self._said(name, call_id, outcome, time.monotonic() - started, said)

    async def _ack(self, http: httpx2.AsyncClient, path: str, call_id: str, headers: dict[str, str]) -> bool:
        try:
            acked = await _post(http, path, headers=headers)
        except httpx2.TransportError as error:
            # Unacked, the call goes to another member after the claim interval.
            logger.warning("ack of call %s failed: %s", call_id, error)
            return False
        if acked.status_code != 200:
            # Handed to another member meanwhile, or settled: not ours to run, and its line is theirs.
            logger.debug("call %s not taken: %s", call_id, acked.text)
            return False
        return True

    async def _run(
        self,
        http: httpx2.AsyncClient,
        calls: str,
        call_id: str,
        name: str,
        arguments: dict[str, Any],
        trace: str | None = None,
    ) -> tuple[dict[str, Any], bool] | None:
        """The result body and whether it is an error; None if the call failed while it ran."""
        traced = {"traceparent": trace} if trace else {}
        reporter = self._reporter(http, f"{calls}/progress", traced)
        call = Call(call_id, reporter, self._asker(http, calls), traceparent=trace)
        current = asyncio.current_task()
        assert current is not None
        self._calls[call_id] = (call, current)
        try:
            return await self._runner(name, arguments, call)
        except asyncio.CancelledError:
            if not call.cancelled:
                raise
            # The call failed while it ran: no one waits for its result any more.
            return None
        finally:
            del self._calls[call_id]

    async def _answer(
        self, http: httpx2.AsyncClient, path: str, body: dict[str, Any], is_error: bool, headers: dict[str, str]
    ) -> tuple[str, str | None]:
        """The call's outcome once its result is sent, and what to say of it."""
        try:
            answered = await _post(http, path, json=body, headers=headers)
        except httpx2.TransportError as error:
            return UNDELIVERED, f"the result could not be delivered: {error}"
        if answered.status_code != 204:
            return REFUSED, f"the result was refused ({answered.status_code}): {answered.text}"
        self.answered += 1
        return (ERROR, said_of(body)) if is_error else (OK, None)

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


def _message_of(answer: httpx2.Response) -> str:
    try:
        return str(answer.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return answer.text


async def _post(http: httpx2.AsyncClient, path: str, attempts: int = 5, **kwargs: Any) -> httpx2.Response:
    """POST, retried on a lost connection under one Idempotency-Key, so a retry never acts twice."""
    headers = {"Idempotency-Key": str(uuid.uuid4()), **kwargs.pop("headers", {})}
    for attempt in range(attempts):
        try:
            return await http.post(path, headers=headers, **kwargs)
        except httpx2.TransportError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")
