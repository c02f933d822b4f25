"""A model's stream bounded on the wire, below the provider SDKs (docs/security.md, "A model's stream is
bounded").

The SDKs read a whole SSE event (and the Gemini SDK a whole JSON line) before an adapter sees any of it,
and some copy a growing event at every chunk: so one event of 200 MB would be held, and parsed, before
workers/models/bounds.py could count a byte of it. Every model client's responses therefore go through a
guard that counts their bytes as they come off the socket: no event longer than the attempt's
`event_bytes`, no more than its `response_bytes` in all (junk events that carry no text, which the adapter
would never count, included). Past either, reading stops with StreamBoundPassed and the response is closed.

The worker asks for no content encoding and refuses a compressed answer: a compressed body would be
counted before it is inflated, and a few kilobytes of gzip inflate to gigabytes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator

import httpx2

from workers.models.base import StreamLimits
from workers.models.bounds import StreamBoundPassed, Tally, active_stream

# Bedrock frames its stream in AWS's binary event-stream encoding, where no blank line ends an event;
# botocore bounds each of its messages itself. The response bound still applies.
_BINARY_FRAMING = "application/vnd.amazon.eventstream"
# What ends an SSE event: a blank line, after LF, CR or CRLF line ends (CRLF CRLF holds LF CR LF).
_EVENT_ENDS = (b"\n\n", b"\r\r", b"\n\r\n")
_EVENT_END = re.compile(b"|".join(re.escape(mark) for mark in _EVENT_ENDS))


def guarded(client: httpx2.AsyncClient) -> httpx2.AsyncClient:
    """`client` with every response it gets counted on the wire, and no compressed answer asked for."""
    client.headers["Accept-Encoding"] = "identity"
    hooks = client.event_hooks
    client.event_hooks = {"request": hooks["request"], "response": [*hooks["response"], _guard]}
    return client


async def _guard(response: httpx2.Response) -> None:
    # Outside a model attempt (none of the adapters' requests are) the defaults apply to the response alone.
    stream = active_stream()
    tally = stream.tally if stream is not None else Tally(StreamLimits())
    if stream is not None:
        stream.opened(response.aclose)
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        await response.aclose()
        raise StreamBoundPassed(
            f"the model provider compressed its answer ({encoding[:32]}) though the worker asked for none:"
            " a compressed stream cannot be bounded as it arrives"
        )
    if isinstance(response.stream, httpx2.AsyncByteStream):
        framed = response.headers.get("content-type", "").startswith(_BINARY_FRAMING)
        response.stream = _Counted(response.stream, tally, events=not framed)


class _Counted(httpx2.AsyncByteStream):
    """A response's bytes, counted as they arrive: in all against the attempt's tally, and (for SSE) the
    bytes since the last event ended against the event bound."""

    def __init__(self, stream: httpx2.AsyncByteStream, tally: Tally, *, events: bool) -> None:
        self._stream = stream
        self._tally = tally
        self._events = events
        self._event = 0
        # The last bytes of the chunk before, where a blank line split across two chunks begins.
        self._tail = b""

    @property
    def elapsed(self) -> object:
        """What the stream underneath says of the response's time (httpx reads it from the stream)."""
        return getattr(self._stream, "elapsed", None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._stream.__aiter__()
        try:
            async for chunk in chunks:
                self._tally.received(len(chunk))
                if self._events:
                    self._count(chunk)
                yield chunk
        finally:
            if isinstance(chunks, AsyncGenerator):
                await chunks.aclose()

    def _count(self, chunk: bytes) -> None:
        limit = self._tally.event_bytes
        seen = self._tail + chunk
        # What of `seen` the running count already holds (the tail of the chunk before).
        counted = len(self._tail)
        first = _EVENT_END.search(seen)
        if first is None:
            self._event += len(chunk)
        else:
            self._tally.event(self._event + first.end() - counted)
            last = first.end()
            if len(seen) - last > limit:
                # A chunk longer than the bound may hold a whole event longer than it: each is measured.
                for found in _EVENT_END.finditer(seen, last):
                    self._tally.event(found.end() - last)
                    last = found.end()
            else:
                for mark in _EVENT_ENDS:
                    at = seen.rfind(mark)
                    if at >= 0:
                        last = max(last, at + len(mark))
            self._event = len(seen) - last
        self._tally.event(self._event)
        self._tail = seen[-2:]

    async def aclose(self) -> None:
        await self._stream.aclose()
