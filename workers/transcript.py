"""The conversation a model step sees, folded from the session's event log."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from broker.services.runs import PlannedCall
from common.events.blocks import DOCUMENT_TYPE, RICH, UNSEEN, describe
from common.events.catalogue import (
    AnyEvent,
    AudioBlock,
    ImageBlock,
    MessageAssistant,
    MessageUser,
    ResourceBlock,
    ResourceLinkBlock,
    ResultBlock,
    TextBlock,
    ToolCallBlock,
    ToolResult,
)
from common.events.read import decode_known
from workers.models.base import Message, ToolOutcome

# Rows read per round trip: a page of the largest events (results with images) stays far under the bound.
_PAGE = 32
# A session's conversation is held up to a quarter of the cache's cap (one busy session does not push out
# every other: 16 MiB at the default, twice the largest event the API takes), and never less than this.
_MIN_SESSION_BYTES = 1 << 20
_SESSION_SHARE = 4
# `EventLog.after`: up to `count` (seq, event) rows of a session after a seq, oldest first.
LogReader = Callable[[str, int, int], Awaitable[list[tuple[int, bytes]]]]


def _text(content: Sequence[ResultBlock]) -> str:
    return "".join(block.data.text for block in content if isinstance(block, TextBlock))


def _is_document(block: ResultBlock) -> bool:
    return (
        isinstance(block, ResourceBlock) and block.data.media_type == DOCUMENT_TYPE and isinstance(block.data.blob, str)
    )


def _result_text(content: Sequence[ResultBlock]) -> str:
    """A result's text as a model reads it: its text blocks, and for each audio, resource or resource link
    block the words naming it (a text resource with its text), one to a line; no function result of the
    four formats carries audio or a blob other than a PDF, so those are named as not shown. Images and PDFs
    go apart, as themselves where the wire takes them."""
    if not any(isinstance(block, RICH) for block in content):
        return _text(content)
    parts = [
        block.data.text if isinstance(block, TextBlock) else describe(block, unseen=UNSEEN)
        for block in content
        if isinstance(block, TextBlock | AudioBlock | ResourceBlock | ResourceLinkBlock) and not _is_document(block)
    ]
    return "\n".join(parts)


def _documents(content: Sequence[ResultBlock]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (block.data.uri, block.data.blob)
        for block in content
        if isinstance(block, ResourceBlock) and _is_document(block) and isinstance(block.data.blob, str)
    )


def fold(event: AnyEvent) -> Message | None:
    """The message an event adds to the conversation, if any."""
    if isinstance(event, MessageUser):
        return Message("user", text=_text(event.message.content))
    if isinstance(event, MessageAssistant):
        content = event.message.content
        calls = [
            PlannedCall(block.data.id, block.data.name, block.data.arguments)
            for block in content
            if isinstance(block, ToolCallBlock)
        ]
        return Message("assistant", text=_text(content), content=list(content), calls=calls)
    if isinstance(event, ToolResult):
        blocks = event.content
        images = tuple((block.data.media_type, block.data.data) for block in blocks if isinstance(block, ImageBlock))
        outcome = ToolOutcome(event.call_id, _result_text(blocks), event.is_error, images, _documents(blocks))
        return Message("tool", result=outcome)
    return None


@dataclass
class _Folded:
    after: int = 0
    messages: list[Message] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    size: int = 0
    # Whether messages[0] is the session's first user message, kept however far the rest is cut.
    pinned: bool = False
    cut: int = 0
    """How many messages were dropped from the front to stay within the bound."""
    used: float = 0.0
    """When a step last read it (time.monotonic)."""

    def add(self, message: Message, size: int, bound: int) -> None:
        if not self.messages and not self.cut and message.role == "user" and size <= bound // 2:
            self.pinned = True
        self.messages.append(message)
        self.sizes.append(size)
        self.size += size
        first = 1 if self.pinned else 0
        # Past the bound the oldest go first (the newest message always stays); a tool result goes with
        # the assistant message that made its call, so no result is left without its call.
        while self.size > bound and len(self.messages) > first + 1:
            self._drop(first)
            while len(self.messages) > first + 1 and self.messages[first].role == "tool":
                self._drop(first)
        # A result whose call had to go is of no use to a model (and some refuse it): it goes as well.
        while len(self.messages) > first and self.messages[first].role == "tool":
            self._drop(first)

    def _drop(self, index: int) -> None:
        self.messages.pop(index)
        self.size -= self.sizes.pop(index)
        self.cut += 1


class Transcripts:
    """Each session's conversation, folded once per worker: a step reads only the events logged since
    the last step this worker ran for the session, so a step costs what is new rather than the whole
    session. The log is append-only and its seqs rise by one, so what was folded stays true whichever
    worker ran the steps between. The bytes folded are bounded; the least recently used session goes
    first and is read again if it comes back, and one no step read for `idle_s` goes too: a run parked
    on an approval or a client call waits minutes to weeks, and a worker holding the conversations of
    thousands of them would grow with the runs that wait (its next step reads the session again).

    One session is bounded too, whatever its size (`session_bytes`: a quarter of the cache's cap, at least
    1 MiB): past
    it the model sees the session's first user message and then the newest messages that fit, cut at a
    message (a tool result goes with the call that asked for it). A session read again is paged through,
    so the worker never holds more of it than that."""

    def __init__(self, log_after: LogReader, max_bytes: int, idle_s: float | None = None) -> None:
        self._after = log_after
        self._max_bytes = max_bytes
        self._idle_s = idle_s
        # One timer at a time, due when the least recently read session has been idle for `idle_s`.
        self._expiry: asyncio.TimerHandle | None = None
        self._session_bytes = max(max_bytes // _SESSION_SHARE, _MIN_SESSION_BYTES)
        self._sessions: OrderedDict[str, _Folded] = OrderedDict()
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        return self._bytes

    @property
    def session_bytes(self) -> int:
        """The most one session's conversation holds (bytes of the events folded)."""
        return self._session_bytes

    async def read(self, session_id: str) -> list[Message]:
        """The conversation so far, oldest message first."""
        folded = self._take(session_id) or _Folded()
        while True:
            rows = await self._after(session_id, folded.after, _PAGE)
            for seq, data in rows:
                folded.after = seq
                event = decode_known(data)
                message = None if event is None else fold(event)
                if message is not None:
                    folded.add(message, len(data), self._session_bytes)
            if len(rows) < _PAGE:
                break
        self._put(session_id, folded)
        return list(folded.messages)

    def _take(self, session_id: str) -> _Folded | None:
        folded = self._sessions.pop(session_id, None)
        if folded is not None:
            self._bytes -= folded.size
        return folded

    def _put(self, session_id: str, folded: _Folded) -> None:
        # Two steps of one session at once (a reclaimed step still finishing) each fold their own copy.
        self._take(session_id)
        folded.used = time.monotonic()
        self._sessions[session_id] = folded
        self._bytes += folded.size
        while self._bytes > self._max_bytes and len(self._sessions) > 1:
            _, oldest = self._sessions.popitem(last=False)
            self._bytes -= oldest.size
        self._arm()

    def _arm(self) -> None:
        idle_s = self._idle_s
        if idle_s is None or self._expiry is not None or not self._sessions:
            return
        oldest = next(iter(self._sessions.values()))
        wait_s = max(oldest.used + idle_s - time.monotonic(), 0.0)
        self._expiry = asyncio.get_running_loop().call_later(wait_s, self._expire, idle_s)

    def _expire(self, idle_s: float) -> None:
        self._expiry = None
        # Least recently read first: the loop stops at the first session read within `idle_s`.
        since = time.monotonic() - idle_s
        while self._sessions and next(iter(self._sessions.values())).used <= since:
            _, oldest = self._sessions.popitem(last=False)
            self._bytes -= oldest.size
        self._arm()
