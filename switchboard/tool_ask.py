"""Asking the person during a call (an input request, docs/concepts.md), for `switchboard tools serve`'s
tools: `await call.ask(message, schema)` posts the request for the call and returns the answer.

The answer comes as `input_provided` on the member's call stream. That frame is live, best effort like
every live frame, so a request not answered on the stream within a while is read back as well: a frame
lost to a reconnect costs a few seconds, never a call that waits forever.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx2

from common.events.catalogue import InputAction, InputProvided

Ask = Callable[[dict[str, Any]], Awaitable["InputAnswer"]]
"""Posts an input request's body for the call and waits for its answer."""

# How long an answer may be missing from the stream before the request is read back.
READ_BACK_S = 5.0
# Answers heard before their ask's 201 came back (a call settled at once): few, and only briefly needed.
_EARLY_KEPT = 64


@dataclass(frozen=True)
class InputAnswer:
    """How an input request ended: `accept` (with the form's `content`; none for a page to visit),
    `decline`, or `cancel` (the person's, or the call's end first: `reason` is then `call_settled` or
    `call_waiting`)."""

    action: InputAction
    content: dict[str, Any] | None = None
    reason: str | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


class AskRefused(Exception):
    """The server refused the request (`status`: 400 naming the field, 409 for a settled call, 429 with
    four requests of the call open), or it could not be sent (`status` 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"the input request was refused ({status}): {message}" if status else message)
        self.status = status


class OpenRequests:
    """The answers to a member's open input requests, by request id."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[InputAnswer]] = {}
        self._early: OrderedDict[str, InputAnswer] = OrderedDict()

    def heard(self, event: InputProvided) -> None:
        """An `input_provided` frame of the call stream: wakes the ask waiting for it."""
        reason = event.reason if isinstance(event.reason, str) else None
        answer = InputAnswer(event.action, dict(event.content) if event.content is not None else None, reason)
        waiting = self._waiting.get(event.request_id)
        if waiting is not None:
            if not waiting.done():
                waiting.set_result(answer)
            return
        self._early[event.request_id] = answer
        while len(self._early) > _EARLY_KEPT:
            self._early.popitem(last=False)

    async def wait(self, http: httpx2.AsyncClient, read_path: str, request_id: str) -> InputAnswer:
        """The request's answer: from the stream, or read back at `read_path` when the stream is quiet."""
        early = self._early.pop(request_id, None)
        if early is not None:
            return early
        waiting: asyncio.Future[InputAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiting
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(asyncio.shield(waiting), READ_BACK_S)
                read = await _read_back(http, read_path)
                if read is not None:
                    return read
        finally:
            del self._waiting[request_id]


async def _read_back(http: httpx2.AsyncClient, path: str) -> InputAnswer | None:
    """The request as it stands, if it has ended; None while it is open (or the read failed: the next
    one, or the stream, will tell)."""
    try:
        read = await http.get(path)
    except httpx2.TransportError:
        return None
    if read.status_code != 200:
        return None
    body = read.json()
    if body["state"] == "answered":
        return InputAnswer(body["action"], body["content"])
    if body["state"] == "cancelled":
        return InputAnswer("cancel")
    return None


def form_body(message: str, schema: dict[str, Any], key: str | None) -> dict[str, Any]:
    return {"message": message, "schema": schema} | ({"key": key} if key is not None else {})


def page_body(message: str, url: str, key: str | None) -> dict[str, Any]:
    return {"message": message, "url": url} | ({"key": key} if key is not None else {})
