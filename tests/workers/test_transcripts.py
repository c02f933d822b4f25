"""The folded-conversation cache: a step reads only what is new, and what it returns is the whole log's fold."""

from __future__ import annotations

import orjson

from broker.codec import loads
from workers.models.base import Message
from workers.transcript import Transcripts, fold


class Log:
    """An append-only log per session, counting the rows each read returns."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[int, bytes]]] = {}
        self.read = 0

    def say(self, session_id: str, text: str) -> None:
        rows = self.rows.setdefault(session_id, [])
        event = {"type": "message_user", "message": {"content": [{"type": "text", "data": {"text": text}}]}}
        rows.append((len(rows) + 1, orjson.dumps(event)))
        # Events the conversation does not show are folded past, not kept.
        rows.append((len(rows) + 1, orjson.dumps({"type": "run_queued"})))

    async def after(self, session_id: str, seq: int, count: int) -> list[tuple[int, bytes]]:
        found = [row for row in self.rows.get(session_id, []) if row[0] > seq][:count]
        self.read += len(found)
        return found

    def whole(self, session_id: str) -> list[str]:
        folded = (fold(loads(data)) for _, data in self.rows[session_id])
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


async def test_a_returned_transcript_is_the_callers_to_change() -> None:
    log = Log()
    log.say("s", "hello")
    transcripts = Transcripts(log.after, max_bytes=1 << 20)
    first = await transcripts.read("s")
    first.clear()
    assert texts(await transcripts.read("s")) == ["hello"]
