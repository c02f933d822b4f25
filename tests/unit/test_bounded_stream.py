"""The one counting wrapper and its reading of where server-sent events end (workers/bounded_stream.py):
every end found once however the chunks cut the body, only the ends every SDK here sees for a bound,
every blank line for a pace; and the pinned clients' error bodies cut at their limit through it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
from collections.abc import AsyncIterator

import pytest

from common.addresses import ProviderAddresses
from workers.bounded_stream import EventEnds
from workers.pinned import ERROR_BODY_LIMIT, pinned_client

# Every end a reader may see, read off the whole body at once: a terminator, then one ending an empty
# line (CRLF is one terminator; a CR at the very end is not yet known to be one).
_TERMINATOR = rb"(?:\r\n|\n|\r(?=[^\n]))"
_EVERY = re.compile(_TERMINATOR + _TERMINATOR)


def streamed(ends: EventEnds, body: bytes, cuts: tuple[int, ...]) -> list[int]:
    """The ends found in `body` fed in chunks cut at `cuts`, as offsets in the body."""
    found: list[int] = []
    bounds = [0, *cuts, len(body)]
    for start, stop in itertools.pairwise(bounds):
        found += [start + offset for offset in ends.feed(body[start:stop])]
    return found


BODIES = [bytes(body) for size in range(1, 8) for body in itertools.product(b"a\r\n", repeat=size)]


@pytest.mark.parametrize("every", [False, True])
def test_every_end_is_found_once_however_the_chunks_cut_the_body(every: bool) -> None:
    for body in BODIES:
        whole = EventEnds(every=every).feed(body)
        for count in (1, 2, 3):
            for cuts in itertools.combinations(range(1, len(body)), count):
                assert streamed(EventEnds(every=every), body, cuts) == whole, (body, cuts)


def test_for_a_pace_every_blank_line_counts() -> None:
    for body in BODIES:
        # Two blank lines in a row are two ends here and one event to a reader: one too many is safe.
        assert len(EventEnds(every=True).feed(body)) == len(_EVERY.findall(body)), body


# Each event's end, and whether Anthropic's SDK (which joins lines until what it holds ends with LF LF,
# CR CR or CRLF CRLF) ends an event there: measured with anthropic 2.17, as every other reader here does.
SEPARATORS = {
    b"\n\n": True,
    b"\r\n\r\n": True,
    b"\r\r": True,
    b"\n\r\n": False,
    b"\r\r\n": False,
    b"\n\r": False,
    b"\r\n\r": False,
}


@pytest.mark.parametrize(("end", "anthropic_ends"), SEPARATORS.items())
def test_for_a_bound_an_event_ends_only_where_every_reader_ends_it(end: bytes, anthropic_ends: bool) -> None:
    event = b"event: content_block_delta\ndata: {}" + end
    assert len(EventEnds().feed(event * 3 + b"event: next")) == (3 if anthropic_ends else 0)
    assert len(EventEnds(every=True).feed(event * 3 + b"event: next")) == 3


@contextlib.asynccontextmanager
async def erring(body: bytes) -> AsyncIterator[str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def test_an_error_body_is_read_up_to_its_limit_and_no_further() -> None:
    addresses = ProviderAddresses(allow_private=True, timeout_s=5)
    async with erring(b"x" * (ERROR_BODY_LIMIT + 300_000)) as url, pinned_client(url, addresses, 5) as client:
        answer = await client.get(f"{url}/v1/models")
    assert answer.status_code == 500
    assert answer.content == b"x" * ERROR_BODY_LIMIT
