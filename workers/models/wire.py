"""A model's stream bounded on the wire, below the provider SDKs (docs/security.md, "A model's stream is
bounded").

The SDKs read a whole SSE event (and the Gemini SDK a whole JSON line) before an adapter sees any of it,
and some copy a growing event at every chunk: so one event of 200 MB would be held, and parsed, before
workers/models/bounds.py could count a byte of it. Every model client therefore sends through a transport
that counts its responses' bytes as they come off the socket: no event longer than the attempt's
`event_bytes`, no more than its wire bound in all (junk events that carry no text, which the adapter would
never count, included). Past either, reading stops with StreamBoundPassed and the response is closed.

The worker asks for no content encoding and refuses a compressed answer: a compressed body would be
counted before it is inflated, and a few kilobytes of gzip inflate to gigabytes.

Everything here is httpx2's public API: a transport wrapping another, and the response it hands back made
with a byte stream of its own (as a transport makes any response).
"""

from __future__ import annotations

import functools
import urllib.request
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import httpx2

from common.addresses import ProviderAddresses
from workers.bounded_stream import CountedStream, EventEnds
from workers.models.base import StreamLimits
from workers.models.bounds import StreamBoundPassed, Tally, active_stream
from workers.models.gemini_lines import HeldLines
from workers.pinned import pinned_client

# Bedrock frames its stream in AWS's binary event-stream encoding, where no blank line ends an event;
# botocore bounds each of its messages itself. The response bound still applies.
_BINARY_FRAMING = "application/vnd.amazon.eventstream"
# Set on the client, not by the transport: a cloud's client signs the request's headers (SigV4) after the
# client has merged its own, and before the transport sees it.
_NO_ENCODING = {"Accept-Encoding": "identity"}


def model_client(
    base_url: str,
    addresses: ProviderAddresses | None,
    timeout_s: float,
    own: Callable[..., httpx2.AsyncClient] = httpx2.AsyncClient,
    limits: httpx2.Limits | None = None,
    *,
    held_lines: bool = False,
) -> httpx2.AsyncClient:
    """The HTTP client a model SDK sends through, every response counted on the wire. A workspace
    provider's (`addresses`) is pinned (workers/pinned.py), follows no redirect and reads nothing of the
    environment; the platform's (None) is `own` (the SDK's kind of client, which keeps its defaults), its
    connection through the proxy the worker's environment names for `base_url`, if any, as the SDK's
    would be, with `limits` on its pool. `held_lines`: the SDK is google-genai, whose reader holds lines
    outside its events across them (workers/models/gemini_lines.py), and those are bounded too."""
    if addresses is not None:
        guarded = functools.partial(WireGuard, held_lines=held_lines)
        return pinned_client(base_url, addresses, timeout_s, headers=_NO_ENCODING, around=guarded)
    direct = httpx2.AsyncHTTPTransport(limits=limits or httpx2.Limits(), proxy=_environment_proxy(base_url))
    return own(timeout=timeout_s, transport=WireGuard(direct, held_lines=held_lines), headers=_NO_ENCODING)


def _environment_proxy(base_url: str) -> str | None:
    # A client given its transport reads no proxy from the environment: read here, for the one origin
    # the platform's client talks to (`*_proxy` and `no_proxy`, as urllib reads them).
    url = urlsplit(base_url)
    if not url.hostname or urllib.request.proxy_bypass(url.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(url.scheme) or proxies.get("all") or None


class WireGuard(httpx2.AsyncBaseTransport):
    """Sends through `transport`, and hands back each response with its body counted as it arrives
    against the model attempt running in this task (outside one, the default bounds for that response
    alone); a compressed answer is refused unread. `held_lines`: a 200 answer's lines outside its events
    are counted as google-genai's reader holds them (the one answer it reads by lines: any other it reads
    whole)."""

    def __init__(self, transport: httpx2.AsyncBaseTransport, *, held_lines: bool = False) -> None:
        self._transport = transport
        self._held_lines = held_lines

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._transport.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise StreamBoundPassed(
                f"the model provider compressed its answer ({encoding[:32]}) though the worker asked for none:"
                " a compressed stream cannot be bounded as it arrives"
            )
        if not isinstance(response.stream, httpx2.AsyncByteStream):
            return response
        stream = active_stream()
        tally = stream.tally if stream is not None else Tally(StreamLimits())
        framed = response.headers.get("content-type", "").startswith(_BINARY_FRAMING)
        held = HeldLines() if self._held_lines and response.status_code == 200 else None
        counted = httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Counted(response.stream, tally, events=not framed, held=held),
            extensions=response.extensions,
        )
        if stream is not None:
            stream.opened(counted.aclose)
        return counted

    async def aclose(self) -> None:
        await self._transport.aclose()


class _Counted(CountedStream):
    """A response's bytes, counted as they arrive: in all against the attempt's tally, (for SSE) the
    bytes of each event, from the end of the one before, against the event bound, and (`held`) the
    lines an SDK holds outside its events against it too."""

    def __init__(
        self, stream: httpx2.AsyncByteStream, tally: Tally, *, events: bool, held: HeldLines | None = None
    ) -> None:
        super().__init__(stream, events=EventEnds() if events else None)
        self._tally = tally
        self._events = events
        self._held = held
        # Bytes of the event under way, before this chunk.
        self._event = 0

    def passed(self, chunk: bytes, ends: Sequence[int]) -> bytes:
        self._tally.received(len(chunk))
        if self._events:
            start = 0
            for end in ends:
                self._tally.event(self._event + end - start)
                self._event, start = 0, end
            self._event += len(chunk) - start
            self._tally.event(self._event)
        if self._held is not None:
            self._tally.held(self._held.feed(chunk))
        return chunk
