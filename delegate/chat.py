"""`chat()`: post one input with its per-turn tools, serve their calls, return the run's final message."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
import msgspec

from common.events.catalogue import (
    AnyEvent,
    ClientToolDispatched,
    ClientToolFailed,
    Event,
    MessageAssistant,
    MessageBody,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    TextBlock,
)
from common.events.read import decode_known

_ENDS: dict[type[Event], Literal["completed", "failed", "cancelled"]] = {
    RunCompleted: "completed",
    RunFailed: "failed",
    RunCancelled: "cancelled",
}
_RECONNECT_S = 0.5
# The stream stays open for the run, however long it is quiet.
_STREAM_TIMEOUT = httpx2.Timeout(10, read=None)
# The lease of the run-scoped client serving a chat()'s tools: its calls fail this soon after a crash.
DEFAULT_LEASE_S = 30


@dataclass(frozen=True, slots=True)
class ClientTool:
    """A tool offered for this run only: a name, a description and a JSON Schema for its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One call the model made to a per-turn tool."""

    tool_name: str
    input: dict[str, Any]
    tool_call_id: str


@dataclass(frozen=True, slots=True)
class ChatResult:
    """How the run ended, its final assistant message and text, and every event it logged."""

    run_id: str
    outcome: Literal["completed", "failed", "cancelled"]
    text: str
    message: dict[str, Any] | None
    error: str | None
    events: list[dict[str, Any]]


ToolCallback = Callable[[ToolCallRequest], Any]


@dataclass(frozen=True, slots=True)
class _Seen:
    """One event of the stream: as the caller is handed it (`on_event`, `ChatResult.events`: the JSON the
    stream sent, as a dict) and as chat() reads it, typed (None for one this release does not read)."""

    sent: dict[str, Any]
    event: AnyEvent | None


def _answer(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"text": value}
    try:
        return {"text": json.dumps(value)}
    except (TypeError, ValueError) as error:
        return {"text": f"the callback's return value is not JSON-serialisable: {error}", "is_error": True}


class _Turn:
    def __init__(self, http: httpx2.AsyncClient, session_id: str, on_call: ToolCallback | None) -> None:
        self._http = http
        self._base = f"/v1/sessions/{session_id}"
        self._on_call = on_call
        self._serving: dict[str, asyncio.Task[None]] = {}
        self._stopped: set[str] = set()

    async def serve(self, client_id: str, event: ClientToolDispatched) -> None:
        """Ack the call, run the callback, post what it returned; errors become error results."""
        if self._on_call is None:
            return
        call = f"{self._base}/clients/{client_id}/calls/{event.call_id}"
        if (await self._http.post(f"{call}/ack")).status_code != 200:
            return
        request = ToolCallRequest(event.tool, event.arguments, event.call_id)
        try:
            value = self._on_call(request)
            if inspect.isawaitable(value):
                value = await value
            body = _answer(value)
        except asyncio.CancelledError:
            if event.call_id not in self._stopped:
                raise
            return  # the call failed while its callback ran (cancelled, timed out, the run gone)
        except Exception as error:
            body = {"text": str(error) or type(error).__name__, "is_error": True}
        # A run cancelled meanwhile refuses the result (409): nothing is owed to anyone then.
        await self._http.post(f"{call}/result", json=body)

    def spawn(self, client_id: str, event: ClientToolDispatched) -> None:
        call_id = event.call_id
        task = asyncio.create_task(self.serve(client_id, event))
        self._serving[call_id] = task
        task.add_done_callback(lambda _: self._serving.pop(call_id, None))

    def stop(self, call_id: str) -> None:
        """The call failed: its callback, if it is still running, is cancelled."""
        task = self._serving.get(call_id)
        if task is not None:
            self._stopped.add(call_id)
            task.cancel()

    async def settle(self) -> None:
        if self._serving:
            await asyncio.wait(set(self._serving.values()))


async def _events(http: httpx2.AsyncClient, path: str, opened: asyncio.Event) -> AsyncGenerator[_Seen, None]:
    """The session's events from the head at the first open, across dropped connections."""
    position: int | None = None
    while True:
        headers = {} if position is None else {"Last-Event-ID": str(position)}
        try:
            # No bound on an event's size: the server is the caller's own, and how large its events may be
            # is its settings' business (a tool's result, a model's message), which a client cannot know.
            async with http.sse(path, headers=headers, timeout=_STREAM_TIMEOUT, max_event_size=None) as source:
                source.response.raise_for_status()
                async for frame in source:
                    # The stream opens with a frame that holds only its position.
                    if position is None and frame.id:
                        position = int(frame.id)
                        opened.set()
                    text = frame.data
                    if not text:
                        continue
                    event = decode_known(text)
                    if event is not None:
                        position = max(position or 0, event.seq)
                    yield _Seen(json.loads(text), event)
        except httpx2.SSEError:
            raise  # not an event stream: no reconnection makes it one
        except httpx2.TransportError:
            await asyncio.sleep(_RECONNECT_S)


def _text(message: MessageBody | None) -> str:
    if message is None:
        return ""
    return "".join(block.data.text for block in message.content if isinstance(block, TextBlock))


async def chat(
    base_url: str,
    session_id: str,
    token: str,
    message: str,
    *,
    client_tools: Sequence[ClientTool] = (),
    on_client_tool_call: ToolCallback | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    cancel: asyncio.Event | None = None,
    http: httpx2.AsyncClient | None = None,
    lease_s: int | None = DEFAULT_LEASE_S,
) -> ChatResult:
    """Post `message` to the session with `client_tools` for this run only, serve their calls through
    `on_client_tool_call`, hand every event to `on_event`, and return when the run ends.

    The run-scoped client serving `client_tools` is leased for `lease_s` seconds (5 to 3,600; None: it
    lives as long as the run) and pinged at half that, so the calls of a delegator that crashed fail
    with `client_gone` within the lease. A callback whose call fails while it runs is cancelled."""
    owned = http is None
    client = http or httpx2.AsyncClient(base_url=base_url, timeout=30)
    client.headers["Authorization"] = f"Bearer {token}"
    turn = _Turn(client, session_id, on_client_tool_call)
    opened = asyncio.Event()
    events = _events(client, f"/v1/sessions/{session_id}/events/stream", opened)
    first = asyncio.ensure_future(anext(events))
    watcher: asyncio.Task[None] | None = None
    pinger: asyncio.Task[None] | None = None
    try:
        # The stream's position is fixed before the input goes in, so no event of the run is missed.
        opening = asyncio.ensure_future(opened.wait())
        await asyncio.wait([first, opening], return_when=asyncio.FIRST_COMPLETED)
        opening.cancel()
        if first.done():
            first.result()  # a stream refused at once (401, 404) raises here, before any input is posted
        body: dict[str, Any] = {"type": "input", "text": message}
        if client_tools:
            body["client_tools"] = [
                {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
                for tool in client_tools
            ]
            if lease_s is not None:
                body["client_tools_ttl_s"] = lease_s
        posted = await client.post(f"/v1/sessions/{session_id}/events", json=body)
        posted.raise_for_status()
        outcome = posted.json()
        run_id, scoped = outcome["run_id"], outcome.get("client_id")
        if cancel is not None:
            watcher = asyncio.create_task(_cancel_when(cancel, client, session_id))
        if scoped is not None and client_tools and lease_s is not None:
            pinger = asyncio.create_task(_keep_leased(client, f"/v1/sessions/{session_id}/clients/{scoped}", lease_s))
        # Steered input joins a run that has already started.
        started = outcome["outcome"] == "steered"
        return await _follow(turn, first, events, run_id, scoped, on_event, started)
    finally:
        for task in (watcher, pinger):
            if task is not None:
                task.cancel()
        first.cancel()
        with contextlib.suppress(BaseException):
            await events.aclose()
        await turn.settle()
        if owned:
            await client.aclose()


async def _follow(
    turn: _Turn,
    first: asyncio.Future[_Seen],
    events: AsyncIterator[_Seen],
    run_id: str,
    scoped: str | None,
    on_event: Callable[[dict[str, Any]], None] | None,
    started: bool,
) -> ChatResult:
    seen: list[dict[str, Any]] = []
    last: MessageBody | None = None
    # Runs of a session go one at a time, so the assistant messages between this run's start and its
    # end are this run's (a queued run's predecessor may still be talking when the input is posted).
    mine = started
    got = await first
    while True:
        seen.append(got.sent)
        if on_event is not None:
            on_event(got.sent)
        match event := got.event:
            case RunStarted() if event.run_id == run_id:
                mine = True
            case ClientToolDispatched() if scoped is not None and event.client_id == scoped:
                turn.spawn(scoped, event)
            case ClientToolFailed() if scoped is not None and event.client_id == scoped:
                turn.stop(event.call_id)
            case MessageAssistant() if mine:
                last = event.message
            case RunCompleted() | RunFailed() | RunCancelled() if event.run_id == run_id:
                error = event.error if isinstance(event, RunFailed) else None
                message = msgspec.to_builtins(last) if last is not None else None
                return ChatResult(run_id, _ENDS[type(event)], _text(last), message, error, seen)
        got = await anext(events)


async def _keep_leased(http: httpx2.AsyncClient, path: str, lease_s: int) -> None:
    """Ping the run-scoped client at half its lease until the run ends (the caller cancels this)."""
    while True:
        await asyncio.sleep(lease_s / 2)
        try:
            pinged = await http.post(f"{path}/ping", headers={"Idempotency-Key": str(uuid.uuid4())})
        except httpx2.TransportError:
            continue  # the next ping, half a lease later, is still in time
        if pinged.status_code == 404:
            return  # the run ended and its client left


async def _cancel_when(cancel: asyncio.Event, http: httpx2.AsyncClient, session_id: str) -> None:
    await cancel.wait()
    await http.post(f"/v1/sessions/{session_id}/cancel")
