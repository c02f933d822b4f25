"""A model's stream, bounded as it arrives (docs/security.md, "A model's stream is bounded").

A provider's server may be hostile (a compromised endpoint, a self-hosted one): what it streams is counted
fragment by fragment, before an adapter keeps or forwards any of it, against the step's `StreamLimits`
(workers/models/base.py).
Every adapter opens one `StreamBounds` per attempt and counts each fragment (an SSE event, a chunk) as it
arrives; what the fragments hold goes to the attempt's assembler (workers/models/assembler.py), which
counts against the same `Tally` the text and reasoning (their UTF-8 bytes together), each tool call's
argument pieces by the call's place in the turn, and whatever else of the turn it keeps. The moment a
bound is passed it raises `StreamBoundPassed`: the adapter abandons the stream (its HTTP response is
closed), and the step ends with run_failed naming the limit and its setting, not tried again (the same
server would send the same).

What a provider SDK reads whole before the adapter sees it (one event) is bounded on the wire by
workers/models/wire.py, against the same attempt's `Tally`; every response the attempt opened is closed
as it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from types import TracebackType

from common.codec import dumps
from workers.models.base import KIB, MIB, ModelError, StreamLimits

TEXT_SETTING = "SWITCHBOARD_MODEL_MAX_TEXT_BYTES"
ARGUMENT_SETTING = "SWITCHBOARD_MODEL_MAX_ARGUMENT_BYTES"
FRAGMENT_SETTING = "SWITCHBOARD_MODEL_MAX_FRAGMENTS"
CALL_SETTING = "SWITCHBOARD_MODEL_MAX_CALLS"


def size_text(count: int) -> str:
    """A byte count as a message names it: `8 MiB`, `1.5 MiB`, `64 KiB`, `1,000 bytes`."""
    if count >= MIB:
        return f"{count // MIB} MiB" if count % MIB == 0 else f"{count / MIB:.1f} MiB"
    if count >= KIB and count % KIB == 0:
        return f"{count // KIB} KiB"
    return f"{count:,} bytes"


def utf8_size(piece: str) -> int:
    """The UTF-8 bytes of `piece` (a lone surrogate a server escaped into its JSON counts as three)."""
    return len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))


# Bytes past 0x7f: a server may write each character they make up as `\uXXXX` (up to three times its
# UTF-8 bytes); Go's encoder writes each of <, > and & as six bytes.
_WIDE = bytes(range(0x80, 0x100))


def json_bytes(value: object) -> int:
    """The most bytes `value` takes as JSON, however a server writes it (its escaping of characters past
    ASCII, of <, > and &; not its indentation)."""
    raw = dumps(value).encode()
    wide = len(raw) - len(raw.translate(None, _WIDE))
    return len(raw) + 2 * wide + 5 * (raw.count(b"<") + raw.count(b">") + raw.count(b"&"))


class StreamBoundPassed(ModelError):
    """The model's stream passed one of the step's bounds: the step ends with this message (the limit
    and the setting that moves it), and is not tried again."""


# Past the event bound and the wire bound, what a format's server sends back (docs/security.md, "A
# model's stream is bounded"): the request's own tools and instructions, and what it streamed.
_SENT_BACK = ", beyond what the server sends back of the request's tools and instructions and of the step's stream"


class Tally:
    """One attempt's counts, each checked the moment it grows. Every count is O(1) a fragment (bar the
    UTF-8 size of a piece that is not ASCII).

    Some formats' servers send back what the worker sent (the Responses API repeats the request's tools
    and instructions in three events) or what they streamed (the Responses API's `.done` events and
    `response.completed` hold the text and arguments again, JSON-escaped): `echoed` is the most the
    request's part takes in one event, and `repeats` says the stream's own is sent again. Both widen the
    wire's bounds by what the worker already holds, never by what the server chooses: the request it
    built, the text and arguments it counted."""

    __slots__ = ("_arguments", "_calls", "_echoed", "_fragments", "_repeats", "_text", "_wire", "limits")

    def __init__(self, limits: StreamLimits, *, echoed: int = 0, repeats: bool = False) -> None:
        self.limits = limits
        self._text = 0
        self._arguments = 0
        self._calls: dict[int, int] = {}
        self._fragments = 0
        self._wire = 0
        self._echoed = echoed
        self._repeats = repeats

    def fragment(self) -> int:
        """One fragment of any kind arrived; how many so far."""
        self._fragments += 1
        if self._fragments > self.limits.fragments:
            raise StreamBoundPassed(
                f"the model's stream passed {self.limits.fragments:,} fragments in one step ({FRAGMENT_SETTING})"
            )
        return self._fragments

    def text(self, piece: str) -> None:
        """Text or reasoning of the turn (or anything the turn keeps beside them: a signature)."""
        self._text += utf8_size(piece)
        if self._text > self.limits.text_bytes:
            limit = size_text(self.limits.text_bytes)
            raise StreamBoundPassed(
                f"the model's stream passed {limit} of text and reasoning in one step ({TEXT_SETTING})"
            )

    def arguments(self, place: int, piece: str) -> None:
        """A piece of the arguments (or the name) of the turn's `place`-th tool call; the first of a place
        is a new call, counted before anything of it is kept (a call costs the step's commit far more
        than its bytes: a block, a record, a dispatch, an event)."""
        grown = utf8_size(piece)
        known = self._calls.get(place)
        if known is None:
            if len(self._calls) == self.limits.calls:
                raise StreamBoundPassed(
                    f"the model's stream passed {self.limits.calls:,} tool calls in one step ({CALL_SETTING})"
                )
            known = 0
        call = known + grown
        self._calls[place] = call
        if call > self.limits.argument_bytes:
            limit = size_text(self.limits.argument_bytes)
            raise StreamBoundPassed(
                f"the model's stream passed {limit} of arguments in one tool call ({ARGUMENT_SETTING})"
            )
        self._arguments += grown
        if self._arguments > self.limits.text_bytes:
            limit = size_text(self.limits.text_bytes)
            raise StreamBoundPassed(
                f"the model's stream passed {limit} of tool-call arguments in one step ({TEXT_SETTING})"
            )

    def _streamed(self) -> int:
        """What a server that repeats its stream may send again of it: its text and arguments so far."""
        return self._text + self._arguments if self._repeats else 0

    @property
    def event_bytes(self) -> int:
        """The most one event may hold on the wire now: the limits' bound, the request's part a server
        sends back, and twice (its JSON escaping) the text and arguments it may send again. A repeat
        comes after what it repeats, so what it may hold is known before its first byte is read."""
        return self.limits.event_bytes + self._echoed + 2 * self._streamed()

    def event(self, size: int) -> None:
        """One event has come to `size` bytes on the wire so far."""
        if size > self.event_bytes:
            limit = size_text(self.limits.event_bytes)
            raise StreamBoundPassed(
                f"the model's stream sent an event of more than {limit} (twice {ARGUMENT_SETTING}, and 64 KiB)"
                + (_SENT_BACK if self._echoed or self._repeats else "")
            )

    def held(self, cost: int) -> None:
        """The lines outside its events that the SDK holds across them (workers/models/gemini_lines.py)
        have come to `cost` bytes, as holding them costs: at most the limits' event bound."""
        if cost > self.limits.event_bytes:
            limit = size_text(self.limits.event_bytes)
            raise StreamBoundPassed(
                f"the model's stream sent more than {limit} of lines outside its events, which the SDK holds"
                f" across them (the event bound: twice {ARGUMENT_SETTING}, and 64 KiB)"
            )

    def received(self, count: int) -> None:
        """`count` bytes of the attempt's responses came off the wire: at most the limits' bound, with
        room for the request's part sent back four times (the Responses API sends it three) and for the
        stream's text and arguments sent again four times, escaped (a message's text is in three `.done`
        events and in `response.completed`)."""
        self._wire += count
        if self._wire > self.limits.response_bytes + 4 * self._echoed + 8 * self._streamed():
            limit = size_text(self.limits.response_bytes)
            raise StreamBoundPassed(
                f"the model's stream passed {limit} on the wire in one step (four times {TEXT_SETTING} and"
                f" the event bound, and 1 KiB for each of {FRAGMENT_SETTING})"
                + (_SENT_BACK if self._echoed or self._repeats else "")
            )


# The attempt running in this task: the wire guard (workers/models/wire.py) counts each response's bytes
# against its tally, and hands it the response to close. A context variable, since the SDKs send their
# requests from the adapter's own task.
_ACTIVE: ContextVar[StreamBounds | None] = ContextVar("switchboard_model_stream", default=None)


def active_stream() -> StreamBounds | None:
    """The model attempt running in this task, if any."""
    return _ACTIVE.get()


class StreamBounds:
    """One attempt at a model step's stream, as an adapter reads it: each fragment counted (its pieces
    are the assembler's to count, against `tally`). Used as an async context manager around the request:
    the wire guard counts its responses against the same tally, and every response the attempt opened is
    closed as it ends, whatever ended it (an SDK may leave its own to the garbage collector, and a
    connection left open lets the server go on sending into it)."""

    def __init__(self, limits: StreamLimits, *, echoed: int = 0, repeats: bool = False) -> None:
        self.tally = Tally(limits, echoed=echoed, repeats=repeats)
        self._token: Token[StreamBounds | None] | None = None
        self._opened: list[Callable[[], Awaitable[None]]] = []

    async def __aenter__(self) -> StreamBounds:
        self._token = _ACTIVE.set(self)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        opened, self._opened = self._opened, []
        for close in opened:
            # Closing an answer already closed does nothing; one that fails to close is gone anyway.
            with contextlib.suppress(Exception):
                await close()

    def opened(self, close: Callable[[], Awaitable[None]]) -> None:
        """A response of this attempt opened; `close` closes it."""
        self._opened.append(close)

    async def fragment(self) -> None:
        """One fragment of any kind arrived (before the adapter reads it): counted, then the loop is given
        to the other tasks. A server that sends as fast as the worker reads would otherwise hold the loop
        for as long as the SDK has parsed fragments in hand (tens of microseconds each), and another
        session's step waits a turn at each of its awaits: yielding every 16 fragments left its round
        trip at 15-40x its idle median, yielding at each at about 2.5x (bench scenario hostile_model)."""
        self.tally.fragment()
        await asyncio.sleep(0)


def passed_bound(error: BaseException) -> StreamBoundPassed | None:
    """The bound behind an SDK's error, if that is what it was: an SDK may wrap what the wire guard
    raised while it read the body (the anthropic package makes it a connection error, which would be
    retried)."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, StreamBoundPassed):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
