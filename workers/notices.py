"""Notices: a notable event (the catalogue's `notice`: an approval requested, a run ended, ...) leaves
`n|<sid>|<seq>` on its partition's work stream in the same script that appends it. The worker taking the
entry reads the event and its session, hands a `Notice` to each consumer in turn (webhooks first; the
workspace inbox may add its own), and marks the entry done only once every one succeeded: a worker that
dies meanwhile leaves the entry's claim to lapse, and another worker hands the notice over again, so a
consumer must be idempotent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker import Broker
from broker.services.notices import NoticeReader
from broker.services.work import Entry
from common.events.catalogue import (
    AnyEvent,
    ApprovalRequested,
    ClientToolWaiting,
    InputRequested,
    McpAuthorizationCompleted,
    McpAuthorizationDeclined,
    McpAuthorizationRequired,
    RunCancelled,
    RunCompleted,
    RunFailed,
)
from common.events.read import decode_known


@dataclass(frozen=True, slots=True)
class Notice:
    session_id: str
    # The run the event is of (an approval's: its call's run); None when no run made it.
    run_id: str | None
    agent_id: str
    subject: str | None
    seq: int
    event: AnyEvent
    raw: bytes
    # When an open approval resolves by itself as a deny (ms, from its call's record: its policy's
    # approval_timeout_s); None for any other event, or an approval that waits for ever.
    approval_deadline: int | None = None
    # When an input request's call fails by its tool's timeout_s (ms), which an open request does not pause;
    # None for any other event, or a call without timeout_s.
    input_deadline: int | None = None


Consumer = Callable[[Notice], Awaitable[None]]


class Notices:
    """Runs `n|` work entries. `consumers` is open: add one before the worker starts."""

    def __init__(self, broker: Broker, consumers: list[Consumer] | None = None) -> None:
        self._broker = broker
        self._reader = NoticeReader(broker.core)
        self.consumers: list[Consumer] = list(consumers or [])

    async def run(self, entry: Entry) -> None:
        (seq,) = entry.detail
        notice = await self.read(entry.session_id, int(seq))
        if notice is not None:
            for consumer in self.consumers:
                await consumer(notice)
        await self._broker.work.done(entry.partition, entry.entry_id)

    async def read(self, session_id: str, seq: int) -> Notice | None:
        """The notice of the event at `seq`; None when the session or the event is gone, or no declaration
        reads it (an event of a newer release, during a rolling update: passed over, logged)."""
        source = await self._reader.read(session_id, seq)
        if source is None:
            return None
        event = decode_known(source.raw)
        if event is None:
            return None
        run_id: str | None = None
        approval_deadline: int | None = None
        input_deadline: int | None = None
        if isinstance(event, RunCompleted | RunFailed | RunCancelled | ClientToolWaiting):
            # The event names its run: no read of the call's record, which settled calls lose after a day
            # (a notice taken late, after the workers were down that long, still names it).
            run_id = event.run_id
        elif isinstance(event, ApprovalRequested):
            call = await self._reader.call(session_id, event.call_id)
            run_id, approval_deadline = call.run_id, call.approval_deadline
        elif isinstance(event, InputRequested):
            call = await self._reader.call(session_id, event.call_id)
            run_id, input_deadline = call.run_id, call.timeout_deadline
        elif isinstance(event, McpAuthorizationRequired):
            # A sign-in names no call: its record keeps the run that asked for it (its inbox item and its
            # webhook name it; the events that end it close the item by its id and carry no webhook).
            run_id = await self._broker.mcp_authorizations.run_of(session_id, event.authorization_id)
        elif isinstance(event, McpAuthorizationCompleted | McpAuthorizationDeclined):
            pass
        else:
            # Events other parts add carry a call id.
            call_id = getattr(event, "call_id", None)
            run_id = (await self._reader.call(session_id, call_id)).run_id if isinstance(call_id, str) else None
        deadlines = {"approval_deadline": approval_deadline, "input_deadline": input_deadline}
        return Notice(session_id, run_id, source.agent_id, source.subject, seq, event, source.raw, **deadlines)
