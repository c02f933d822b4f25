"""An answer's body counted as it arrives, and where its server-sent events end: the one counting wrapper
the model clients (workers/models/wire.py), the pinned clients' error bodies (workers/pinned.py) and the
MCP connections (workers/mcp/wire.py) read their bodies through. httpx2's public API only (a byte stream).

Where an event ends is read two ways. A bound counts an event's bytes until its end, and an end the
reader above does not see would let that reader hold an event longer than the bound: so for a bound an
event ends only where every SSE reader here ends one. The readers differ on the rarer blank lines. OpenAI's
SDK, Gemini's and httpx2's own split lines at CR, LF and CRLF, so a blank line after any of them ends an
event. Anthropic's SDK joins lines until what it holds ends with LF LF, CR CR or CRLF CRLF: LF CRLF
(`\\n\\r\\n`), CR CRLF (`\\r\\r\\n`) and LF CR (`\\n\\r`) end nothing there, and it holds on, copying what
it holds at every line. So for a bound an event ends at LF LF, at CRLF CRLF, and at CR CR followed by
anything but LF; what a server sends with other line ends is one long event to the bound (safe, and no
server in good faith sends it: OpenAI and Anthropic end events with LF LF, Google with CRLF CRLF). A
pace (workers/mcp/wire.py) counts the other way, every blank line any reader may end an event at: there
one too many is safe, one too few lets events through unpaced. A CR that may be the start of a CRLF is
held over to the next chunk before it decides an end.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

import httpx2

# Ends every reader here sees (for a bound), and every blank line any SSE reader may see (for a pace).
_SURE = re.compile(rb"\n\n|\r\n\r\n|\r\r(?=[^\n])")
_ANY = re.compile(rb"\r\n\r\n|\n\r\n|\r\r\n|\n\n|\r\r(?=[^\n])|\n\r(?=[^\n])")
# The longest start of an end a chunk can finish (`\r\n\r`), kept from the chunk before.
_HELD = 3


class EventEnds:
    """Where SSE events end in a body read in chunks, an end cut across two chunks included; every end
    is found once, whatever the chunks (the tests hold it to a reading of the whole body)."""

    __slots__ = ("_end", "_tail")

    def __init__(self, *, every: bool = False) -> None:
        """`every`: every blank line any reader may end an event at (for a pace); else only the ends every
        reader here sees (for a bound)."""
        self._end = _ANY if every else _SURE
        # What came after the last end found, up to _HELD bytes: where the next chunk's first end may begin.
        self._tail = b""

    def feed(self, chunk: bytes) -> list[int]:
        """The offsets in `chunk` just past each event end (0: an end that the chunk's first byte
        settled, the event ending before it)."""
        held = len(self._tail)
        seen = self._tail + chunk if held else chunk
        ends = [found.end() - held for found in self._end.finditer(seen)]
        after = ends[-1] + held if ends else 0
        self._tail = seen[max(after, len(seen) - _HELD) :]
        return ends


class CountedStream(httpx2.AsyncByteStream):
    """A body read through `passed`: each chunk counted (its bytes in `read`; with `events`, where events
    end in it) before it goes on. A subclass says what the count means: `passed` may refuse the chunk
    (raise), cut it, or end the body after it (`ended`)."""

    def __init__(self, stream: httpx2.AsyncByteStream, *, events: EventEnds | None = None) -> None:
        self._stream = stream
        self._ends = events
        # Bytes of the body so far.
        self.read = 0
        # No chunk is read after the one that set it.
        self.ended = False

    def count(self, chunk: bytes) -> Sequence[int]:
        """`chunk` arrived: counted; the offsets just past each event end in it (none unless `events`)."""
        self.read += len(chunk)
        return self._ends.feed(chunk) if self._ends is not None else ()

    def passed(self, chunk: bytes, ends: Sequence[int]) -> bytes:
        """What of `chunk` (counted, its event `ends` found) goes on."""
        return chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = aiter(self._stream)
        try:
            async for chunk in chunks:
                out = self.passed(chunk, self.count(chunk))
                if out:
                    yield out
                if self.ended:
                    return
        finally:
            if isinstance(chunks, AsyncGenerator):
                await chunks.aclose()

    async def aclose(self) -> None:
        await self._stream.aclose()
