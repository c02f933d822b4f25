"""The folded-conversation cache: a step reads only what is new, and what it returns is the whole log's fold."""

from __future__ import annotations

import asyncio
import tracemalloc

from common.events.build import (
    image_block,
    message_assistant,
    message_user,
    text_block,
    tool_call_block,
    tool_result_blocks,
)
from common.events.catalogue import RunQueued
from common.events.read import decode, encode
from workers.models.base import Message
from workers.transcript import Transcripts, fold


class Log:
    """An append-only log per session, counting the rows each read returns."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[int, bytes]]] = {}
        self.read = 0

    def say(self, session_id: str, text: str) -> None:
        rows = self.rows.setdefault(session_id, [])
        rows.append((len(rows) + 1, message_user(text, "client").encode()))
        # Events the conversation does not show are folded past, not kept.
        rows.append((len(rows) + 1, encode(RunQueued(run_id="r")).encode()))

    async def after(self, session_id: str, seq: int, count: int) -> list[tuple[int, bytes]]:
        found = [row for row in self.rows.get(session_id, []) if row[0] > seq][:count]
        self.read += len(found)
        return found

    def whole(self, session_id: str) -> list[str]:
        folded = (fold(decode(data)) for _, data in self.rows[session_id])
        return [message.text for message in folded if message is not None]


def texts(messages: list[Message]) -> list[str]:
    return [message.text for message in messages]


async def test_a_step_reads_only_what_was_logged_since_the_last() -> None:
    log = Log()
    transcripts = Transcripts(log.after, max_bytes=1 << 20)
    for turn in range(600):
        log.say("s", f"turn {turn}")
        assert texts(await transcripts.read("s")) == log.whole("s")
    # Each row was read once, though the log was folded 600 times (and past one 500-row page).
    assert log.read == len(log.rows["s"])


async def test_the_bound_evicts_the_least_recent_session_and_a_return_reads_it_whole() -> None:
    log = Log()
    for turn in range(50):
        log.say("a", f"a {turn}")
        log.say("b", f"b {turn}")
    one_session = sum(len(data) for _, data in log.rows["a"] if b"message_user" in data)
    transcripts = Transcripts(log.after, max_bytes=one_session + 10)
    assert texts(await transcripts.read("a")) == log.whole("a")
    assert texts(await transcripts.read("b")) == log.whole("b")
    assert transcripts.held_bytes <= one_session + 10
    log.say("a", "back")
    before = log.read
    assert texts(await transcripts.read("a")) == log.whole("a")
    assert log.read - before == len(log.rows["a"])


async def test_a_session_no_step_read_for_the_idle_time_leaves_and_a_return_reads_it_whole() -> None:
    log = Log()
    log.say("parked", "sign this")
    log.say("busy", "hello")
    transcripts = Transcripts(log.after, max_bytes=1 << 20, idle_s=0.3)
    await transcripts.read("parked")
    # The busy session is read every 50 ms for 0.6 s: it stays, and the parked one goes meanwhile.
    for _ in range(12):
        await transcripts.read("busy")
        await asyncio.sleep(0.05)
    busy = sum(len(data) for _, data in log.rows["busy"] if b"message_user" in data)
    assert transcripts.held_bytes == busy
    await asyncio.sleep(0.6)
    assert transcripts.held_bytes == 0
    log.say("parked", "approved")
    before = log.read
    assert texts(await transcripts.read("parked")) == log.whole("parked")
    assert log.read - before == len(log.rows["parked"])


async def test_a_returned_transcript_is_the_callers_to_change() -> None:
    log = Log()
    log.say("s", "hello")
    transcripts = Transcripts(log.after, max_bytes=1 << 20)
    first = await transcripts.read("s")
    first.clear()
    assert texts(await transcripts.read("s")) == ["hello"]


def _called(call_id: str) -> bytes:
    """An assistant message calling one tool."""
    return message_assistant([tool_call_block(call_id, "client__web__t", {})], None).encode()


def _turn(rows: list[tuple[int, bytes]], call_id: str, result: bytes) -> None:
    """An assistant message calling one tool, then the tool's result (`result`: the event's bytes)."""
    rows.append((len(rows) + 1, _called(call_id)))
    rows.append((len(rows) + 1, result))


def _result(call_id: str, text: str, image: str = "") -> bytes:
    content = [text_block(text), *([image_block("image/png", image)] if image else [])]
    return tool_result_blocks(call_id, content, is_error=False).encode()


async def test_one_session_past_the_bound_keeps_its_first_message_and_the_newest_that_fit() -> None:
    log = Log()
    log.say("s", "the task")
    rows = log.rows["s"]
    for i in range(40):
        _turn(rows, f"c{i}", _result(f"c{i}", f"{i} " + "r" * 100_000))
    transcripts = Transcripts(log.after, max_bytes=1 << 20)
    messages = await transcripts.read("s")
    assert transcripts.held_bytes <= transcripts.session_bytes == 1 << 20
    assert (messages[0].role, messages[0].text) == ("user", "the task")
    # The newest messages, from an assistant message on: no result without the call that asked for it.
    assert messages[1].role == "assistant"
    newest = messages[-1].result
    assert newest is not None
    assert newest.text.startswith("39 ")
    called = {c.call_id for m in messages for c in m.calls}
    assert all(m.result.call_id in called for m in messages if m.result is not None)
    assert 15 <= len(messages) < 41
    # What comes next is folded on the same terms.
    log.say("s", "more")
    again = await transcripts.read("s")
    assert (again[0].text, again[-1].text) == ("the task", "more")
    assert transcripts.held_bytes <= 1 << 20


class _Repeating:
    """A log of 30 results of the largest size (5 MiB of image, 7 MB as base64, and 65,536 characters of
    text), made as they are read so the test holds one of them, not 30."""

    def __init__(self) -> None:
        self.result = _result("c", "t" * 65_536, "A" * (7 * 1024 * 1024))
        self.rows = 61

    async def after(self, session_id: str, seq: int, count: int) -> list[tuple[int, bytes]]:
        found = []
        for n in range(seq + 1, min(seq + count, self.rows) + 1):
            if n == 1:
                found.append((n, message_user("", "client").encode()))
            elif n % 2 == 0:
                found.append((n, _called("c")))
            else:
                found.append((n, self.result))
        return found


async def test_thirty_results_of_the_largest_size_hold_the_worker_to_its_bound() -> None:
    log = _Repeating()
    bound = 16 * 1024 * 1024
    transcripts = Transcripts(log.after, max_bytes=bound)
    tracemalloc.start()
    try:
        await transcripts.read("s")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert transcripts.held_bytes <= bound
    # Held: the bound. In flight besides: one event being parsed (a decoder takes about twelve times a 7 MB
    # event's size while it parses), whatever the number of results. (Unbounded, the same log held 212 MiB
    # with a peak of 297 MiB.)
    held = transcripts.held_bytes / 2**20
    print(f"\n[transcript] 30 largest results: held {held:.1f} MiB, peak {peak / 2**20:.1f} MiB")  # noqa: T201
    assert peak <= bound + 16 * len(log.result), peak


async def test_a_result_whose_call_had_to_go_goes_too() -> None:
    log = Log()
    log.say("s", "the task")
    _turn(log.rows["s"], "c0", _result("c0", "r" * (2 << 20)))
    messages = await Transcripts(log.after, max_bytes=1 << 20).read("s")
    called = {c.call_id for m in messages for c in m.calls}
    assert all(m.result.call_id in called for m in messages if m.result is not None)
    assert [m.role for m in messages] == ["user"]
