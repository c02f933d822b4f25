"""A session's log from a seq on, event by event, with the live deltas between them: what a front door
translates. The same rules as the event stream (api/sse.py): pub/sub only wakes the reader, the log is
the truth, a gap or a lag re-reads the log, so no event is skipped and none is seen twice."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from api.doors.shown import Paused, Shown
from api.doors.view import RunView
from api.state import AppState
from broker.errors import NotFound
from broker.services.live import Signal, Subscription
from common.events.marks import event_seq, is_logged
from common.events.read import decode_known

_PAGE = 200
# A look back through the log (a continuation's start, a resumed run, a snapshot) reads at most this many
# events and about this many bytes: a session's events can be large (a result with images, megabytes), so
# pages shrink to keep each read near _BACK_PAGE_BYTES.
BACK_EVENTS = 2_000
BACK_BYTES = 8 << 20
_BACK_PAGE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Logged:
    """A logged event, as stored."""

    seq: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Live:
    """A live extra (`message_delta`, `thinking_delta`, `tool_call_delta`), as published: no seq, never in
    the log."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Quiet:
    """Nothing happened for a keep-alive interval: a door writes its keep-alive."""


class SessionGone(Exception):
    """The session was deleted, or the process is shutting down: the door ends its stream."""


async def follow(
    state: AppState, session_id: str, after: int, subscription: Subscription
) -> AsyncIterator[Logged | Live | Quiet]:
    """Every event after seq `after`, then each one as it is appended, with the deltas published in
    between. `subscription` must be open before `after` was read, so nothing appended since is missed."""
    last = after
    while True:
        async for logged in _backlog(state, session_id, last):
            last = logged.seq
            yield logged
        while True:
            item = await subscription.get()
            if not isinstance(item, bytes):
                if await _ended(state, session_id, item):
                    raise SessionGone
                if item is None:
                    yield Quiet()
                break  # quiet, or lagged: the log says what was missed
            if not is_logged(item):
                yield Live(item)
                continue
            seq = event_seq(item)
            if seq > last + 1:
                break  # a gap: read it from the log
            if seq == last + 1:
                last = seq
                yield Logged(seq, item)


async def back(state: AppState, session_id: str) -> AsyncIterator[tuple[int, bytes]]:
    """The session's events newest first, as stored, until BACK_EVENTS or BACK_BYTES are read."""
    before: int | None = None
    count, events, size = 16, 0, 0
    while events < BACK_EVENTS and size < BACK_BYTES:
        rows = await state.broker.log.before(session_id, before, min(count, BACK_EVENTS - events))
        page = 0
        for seq, raw in rows:
            yield seq, raw
            before, page = seq, page + len(raw)
        events, size = events + len(rows), size + page
        if len(rows) < count:
            return
        count = max(1, min(_PAGE, count * _BACK_PAGE_BYTES // max(page, 1)))


async def _ended(state: AppState, session_id: str, item: Signal | None) -> bool:
    if item is Signal.DELETED or item is Signal.CLOSING:
        return True
    return item is None and not await state.broker.sessions.exists(session_id)


async def _backlog(state: AppState, session_id: str, after: int) -> AsyncIterator[Logged]:
    while True:
        rows = await state.broker.log.after(session_id, after, _PAGE)
        for seq, data in rows:
            after = seq
            yield Logged(seq, data)
        if len(rows) < _PAGE:
            return


async def shown_items(
    state: AppState, session_id: str, after: int, view: RunView, subscription: Subscription
) -> AsyncIterator[Shown | Quiet]:
    """What `view` shows of the log from seq `after`, item by item (and Quiet for keep-alives), up to and
    including where the frontend's turn begins or the run ends."""
    for item in view.opening():
        yield item
    if view.over():
        return
    async for got in follow(state, session_id, after, subscription):
        if isinstance(got, Quiet):
            yield got
            continue
        event = decode_known(got.data)
        if event is None:
            continue
        for item in view.logged(event) if isinstance(got, Logged) else view.live(event):
            if isinstance(item, Paused):
                still = await _still_owed(state, session_id, item)
                if still is None:
                    # A replay (a reloaded frontend) reached a turn that was taken already: go on.
                    view.carry_on()
                    continue
                item = still
            yield item
            if view.over():
                return


async def _still_owed(state: AppState, session_id: str, pause: Paused) -> Paused | None:
    """The pause with only the calls still owed, the approvals and input requests still waiting (a replay
    passes turns that were taken long ago); None when nothing is left to wait for."""
    calls, approvals, inputs = [], [], []
    for call_id in pause.calls:
        record = await state.broker.calls.record(session_id, call_id)
        if record is not None and record.state in ("dispatched", "acked"):
            calls.append(call_id)
    for approval in pause.approvals:
        record = await state.broker.calls.record(session_id, approval.call_id)
        if record is not None and record.state == "awaiting":
            approvals.append(approval)
    for asked in pause.inputs:
        with contextlib.suppress(NotFound):
            if (await state.broker.inputs.get(session_id, asked.request_id)).state == "open":
                inputs.append(asked)
    if not calls and not approvals and not inputs:
        return None
    return Paused(pause.step, tuple(calls), tuple(approvals), tuple(inputs))
