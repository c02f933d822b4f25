"""What the worker reads of a grant's server, piece by piece: the pace's debt, the events of a stream and
the JSON values of a message told from their bytes, the budget every connection's answers share, and
which of our requests an HTTP exchange carries (told by public data only: the message's id)."""

from __future__ import annotations

import json
import random

import httpx2
import mcp.types as mt
import pytest
from mcp.shared.message import SessionMessage

from workers.bounded_stream import EventEnds
from workers.mcp import flow
from workers.mcp.budget import MAX_VALUES, Budget, Reading, Refused
from workers.mcp.exchanges import MARK, Exchanges
from workers.mcp.flow import Bucket
from workers.mcp.guard import Guard
from workers.mcp.scan import JsonValues
from workers.mcp.wire import _parts


def test_what_a_connection_owes_its_pace_is_capped() -> None:
    # 64 KiB of keep-alive comments is some 21,000 events: before, 210 s owed at 100 a second.
    events = Bucket(flow.EVENTS_PER_S, flow.EVENT_BURST)
    assert events.spend(21_000) <= flow.MAX_OWED_S + 0.01
    assert events.spend(21_000) <= flow.MAX_OWED_S + 0.01


def test_a_chunk_of_many_events_is_handed_on_a_burst_at_a_time() -> None:
    chunk = b":\n\n" * 450
    ends = EventEnds(every=True).feed(chunk)
    assert len(ends) == 450
    parts = _parts(chunk, ends)
    assert [events for _, events in parts] == [200, 200, 50]
    assert b"".join(part for part, _ in parts) == chunk
    assert _parts(b"data: x\n\n", [9]) == [(b"data: x\n\n", 1)]


@pytest.mark.parametrize("seed", range(20))
def test_events_end_where_the_stream_says_however_it_is_cut(seed: int) -> None:
    endings = [b"\n", b"\r\n", b"\r"]
    rng = random.Random(seed)
    stream, expected = b"", []
    for number in range(30):
        line_end = rng.choice(endings)
        # A CR then an LF would be one line's end (CRLF), not a blank line.
        blank = rng.choice([e for e in endings if not (line_end == b"\r" and e.startswith(b"\n"))])
        stream += b"data: " + str(number).encode() + line_end + b": c" + line_end + blank
        expected.append(len(stream))
        stream += b"\r\n" * rng.randint(0, 3)  # blank lines between events end no event
    cuts = sorted(rng.sample(range(1, len(stream)), 25))
    ends, found, at = EventEnds(every=True), [], 0
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        found += [at + offset for offset in ends.feed(stream[start:end])]
        at = end
    # A CR pair that ends the body may be the start of a CRLF: it is settled by whatever comes next.
    found += [at + offset for offset in ends.feed(b"data: next\n")]
    # Blank lines after an event's end end empty events (counted, for the pace); the others are the events'.
    found = [end for start, end in zip([0, *found], found, strict=False) if stream[start:end].strip(b"\r\n")]
    assert len(found) == len(expected)
    assert all(abs(e - f) <= 1 for f, e in zip(found, expected, strict=True)), (found, expected)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        # Every `,` `[` `{` outside a string: at least one for each value the parser makes.
        (b'{"a": [1, 2, 3], "b": {"c": "x,[{"}}', 6),
        (b'["a\\"b,c", "d\\\\", [], {}]', 6),
        (b"[" + b"[]," * 1000 + b"[]]", 2002),
        (b'": [1,2]\n{"a": 1, "b": 2}', 2),
    ],
)
def test_json_values_are_counted_outside_strings_whatever_the_chunks(text: bytes, values: int) -> None:
    assert JsonValues().feed(text) == values
    for size in (1, 2, 3, 7):
        counter = JsonValues()
        for start in range(0, len(text), size):
            counter.feed(text[start : start + size])
        assert counter.count == values, size


def test_a_message_of_too_many_values_is_refused_as_it_arrives() -> None:
    reading = Reading(Budget(), message_limit=16 * 2**20, events=False)
    chunk = b"[],[],[]," * 1000  # 6,000 values
    for _ in range(MAX_VALUES // 6000):
        reading.feed(chunk)
    with pytest.raises(Refused, match="JSON values"):
        reading.feed(chunk)


def test_each_event_is_a_message_of_its_own_and_given_back_when_whole() -> None:
    budget = Budget(1024)
    reading = Reading(budget, message_limit=600, events=True)
    # Many events of 500 bytes: within a bound each, however many.
    event = b"data: " + b"x" * 492 + b"\n\n"
    for _ in range(20):
        reading.feed(event[:300])
        assert budget.held == 300
        reading.feed(event[300:])
        assert budget.held == 0
    with pytest.raises(Refused, match="passed 600 bytes"):
        reading.feed(b"data: " + b"x" * 700)


def test_the_answers_of_every_connection_share_the_budget() -> None:
    budget = Budget(1000)
    first = Reading(budget, message_limit=10_000, events=False)
    second = Reading(budget, message_limit=10_000, events=False)
    first.feed(b"x" * 600)
    with pytest.raises(Refused, match="in flight already"):
        second.feed(b"x" * 600)
    first.close()
    second.feed(b"x" * 600)
    assert budget.held == 600


def _post(body: dict[str, object]) -> httpx2.Request:
    return httpx2.Request("POST", "http://mcp.example/mcp", content=json.dumps(body).encode())


def test_an_exchange_is_told_its_request_by_the_id_of_the_message_it_carries() -> None:
    exchanges = Exchanges()
    gate = Guard("server", exchanges, lambda: None, lambda: None)
    with exchanges.operation("call", 100.0) as meta:
        params = {"name": "wait", "_meta": {**meta, "progressToken": 7}}
        sent = gate.sent(SessionMessage(mt.JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/call", params=params)))
        # The mark stops here; the rest of `_meta` goes on.
        assert isinstance(sent.message, mt.JSONRPCRequest)
        assert sent.message.params == {"name": "wait", "_meta": {"progressToken": 7}}
        wire = sent.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
        found = exchanges.of(_post(wire))
        assert found is not None
        assert (found.kind, found.deadline) == ("call", 100.0)
        # Another request, and a notification of the same id, are not the call's.
        assert exchanges.of(_post({"jsonrpc": "2.0", "id": 8, "method": "ping"})) is None
        assert exchanges.of(_post({"jsonrpc": "2.0", "method": "notifications/cancelled"})) is None
    # Ended with its block: its id is forgotten and its exchanges are not found any more.
    assert found.closed
    assert exchanges.of(_post(wire)) is None


def test_a_request_whose_mark_is_all_of_its_params_goes_without_params() -> None:
    exchanges = Exchanges()
    gate = Guard("server", exchanges, lambda: None, lambda: None)
    with exchanges.operation("list", 100.0) as meta:
        sent = gate.sent(
            SessionMessage(mt.JSONRPCRequest(jsonrpc="2.0", id=3, method="tools/list", params={"_meta": meta}))
        )
        assert sent.message.model_dump(by_alias=True, exclude_unset=True) == {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/list",
        }
        assert MARK not in json.dumps(sent.message.model_dump(mode="json"))


def test_the_clients_standing_request_is_one_until_it_is_answered() -> None:
    exchanges = Exchanges()
    gate = Guard("server", exchanges, lambda: None, lambda: None)
    gate.sent(SessionMessage(mt.JSONRPCRequest(jsonrpc="2.0", id=4, method="subscriptions/listen")))
    listen = {"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen"}
    standing = exchanges.of(_post(listen))
    assert standing is not None
    assert standing.kind == "standing"
    gate.admit(SessionMessage(mt.JSONRPCResponse(jsonrpc="2.0", id=4, result={})))
    assert exchanges.of(_post(listen)) is None
