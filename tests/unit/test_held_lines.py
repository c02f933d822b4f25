"""The lines google-genai's reader holds outside its events (workers/models/gemini_lines.py): what they
cost, read off a body however its chunks cut it as off the whole; nothing for a stream in good faith; and
the wire guard of a Gemini client refusing them past the event bound (docs/security.md, "A model's
stream is bounded")."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Iterable

import httpx2
import pytest

from workers.models.base import StreamLimits
from workers.models.bounds import StreamBoundPassed, StreamBounds
from workers.models.gemini_lines import LINE_COST, HeldLines
from workers.models.wire import WireGuard


def whole(body: bytes) -> int:
    """What the held lines of `body` cost, read as the SDK reads it: lines split at CRLF, CR and LF; each
    that is neither blank nor a `data: ` line held, a str of four bytes a character if one is past ASCII;
    the line under way by its bytes once it cannot be a `data: ` line."""
    *lines, under_way = re.split(rb"\r\n|\r|\n", body)
    cost = sum(
        (len(line) if line.isascii() else 4 * len(line)) + LINE_COST
        for line in lines
        if line and not line.startswith(b"data: ")
    )
    if not under_way.startswith(b"data: ") and not b"data: ".startswith(under_way):
        cost += len(under_way)
    return cost


def fed(body: bytes, cuts: Iterable[int]) -> int:
    held = HeldLines()
    cost = 0
    for start, stop in itertools.pairwise([0, *cuts, len(body)]):
        cost = held.feed(body[start:stop])
    return cost


TOKENS = [b"data: ", b"dat", b"{", "é".encode(), b"\r", b"\n"]
BODIES = [b"".join(body) for size in range(1, 5) for body in itertools.product(TOKENS, repeat=size)]


def test_what_held_lines_cost_is_found_however_the_chunks_cut_the_body() -> None:
    for body in BODIES:
        expected = whole(body)
        assert fed(body, ()) == expected, body
        for count in (1, 2):
            for cuts in itertools.combinations(range(1, len(body)), count):
                assert fed(body, cuts) == expected, (body, cuts)


def test_a_stream_in_good_faith_holds_nothing_and_an_error_over_lines_little() -> None:
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "index": 0}]}
    stream = b"".join(b"data: " + json.dumps(chunk).encode() + end for end in (b"\r\n\r\n", b"\n\n", b"\r\r"))
    assert HeldLines().feed(stream) == 0
    # Vertex AI's error in a stream that began well: pretty-printed, no `data: ` on its lines.
    error = {"error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}}
    lines = json.dumps(error, indent=2).encode().split(b"\n")
    assert HeldLines().feed(stream + b"\n".join(lines) + b"\n") == sum(len(line) + LINE_COST for line in lines)


LIMITS = StreamLimits(text_bytes=4_096, argument_bytes=1_024, fragments=100)


async def read(chunks: Iterable[bytes], *, status: int = 200, held_lines: bool = True) -> int:
    """What an attempt at LIMITS reads of one answer through the wire guard of a Gemini client."""

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers={"content-type": "text/event-stream"}, content=body())

    client = httpx2.AsyncClient(transport=WireGuard(httpx2.MockTransport(answer), held_lines=held_lines))
    received = 0
    endpoint = "http://gemini.test/v1beta/models/m:streamGenerateContent?alt=sse"
    async with StreamBounds(LIMITS), client, client.stream("POST", endpoint) as response:
        async for piece in response.aiter_bytes():
            received += len(piece)
    return received


async def test_held_lines_past_the_event_bound_are_refused_and_only_where_the_sdk_reads_by_lines() -> None:
    # 4-byte events, each under any bound, whose lines together cost past the event bound (66 KiB).
    lines = LIMITS.event_bytes // (2 + LINE_COST) + 1
    attack = [b"{a\n\n" * lines]
    with pytest.raises(StreamBoundPassed) as refused:
        await read(attack)
    assert str(refused.value) == (
        "the model's stream sent more than 66 KiB of lines outside its events, which the SDK holds across them"
        " (the event bound: twice SWITCHBOARD_MODEL_MAX_ARGUMENT_BYTES, and 64 KiB)"
    )
    # One line fewer passes; an answer not of 200, which the SDK reads whole, and a client of another SDK
    # count only the events and the wire.
    assert await read([b"{a\n\n" * (lines - 1)]) == 4 * (lines - 1)
    assert await read(attack, status=500) == 4 * lines
    assert await read(attack, held_lines=False) == 4 * lines
