"""Group commit: calls of one partition that arrive while one is in flight go together, each answered alone."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from redis.exceptions import ResponseError

from broker import Broker
from broker.scripts.batching import Batcher
from broker.scripts.layouts import call_names
from broker.scripts.source import layout, library
from tests.helpers import make_session

Sent = tuple[tuple[str, str], list[str], Sequence[str | int | bytes]]


class FakeRedis:
    """Answers each call with its first argument; a batch with one reply per call (an error for 'bad')."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.gate = asyncio.Event()

    async def send(self, head: tuple[str, str], keys: list[str], args: Sequence[str | int | bytes]) -> Any:
        self.sent.append((head, keys, args))
        await self.gate.wait()
        if head[1] != "batch":
            return args[0]
        replies: list[Any] = []
        at = 2
        for _ in range(int(args[0])):
            count = int(args[at + 2])
            first = args[at + 3]
            replies.append(ResponseError("bad call") if first == "bad" else first)
            at += 3 + count
        return replies


async def settle() -> None:
    """Let every task that can run do so (a call's task, then its partition's sender)."""
    for _ in range(5):
        await asyncio.sleep(0)


def batcher(fake: FakeRedis, limit: int = 64) -> Batcher:
    return Batcher(fake.send, {"ping_client": "single"}, "batch", limit=limit)


async def test_the_first_call_goes_alone_and_those_that_wait_go_together() -> None:
    fake = FakeRedis()
    sending = batcher(fake)
    first = asyncio.create_task(sending.run(0, "ping_client", ["k"], ["p"], ["a"]))
    await settle()
    others = [asyncio.create_task(sending.run(0, "ping_client", ["k"], ["p"], [f"b{i}"])) for i in range(5)]
    await settle()
    fake.gate.set()
    assert await first == "a"
    assert await asyncio.gather(*others) == [f"b{i}" for i in range(5)]
    assert [head for head, _, _ in fake.sent] == [("FCALL", "single"), ("FCALL", "batch")]
    # Alone: its keys then the shared ones; together: the shared keys once, then each call's own.
    assert fake.sent[0][1] == ["k", "p"]
    assert fake.sent[1][1] == ["p"] + ["k"] * 5
    assert fake.sent[1][2][:2] == [5, 1]


async def test_partitions_do_not_wait_for_each_other_and_batches_are_bounded() -> None:
    fake = FakeRedis()
    sending = batcher(fake, limit=2)
    calls = [asyncio.create_task(sending.run(p, "ping_client", ["k"], ["p"], [f"{p}"])) for p in (0, 1, 0, 0, 0)]
    await settle()
    assert len(fake.sent) == 2  # one per partition, at once
    fake.gate.set()
    assert await asyncio.gather(*calls) == ["0", "1", "0", "0", "0"]
    # Partition 0's first call went alone; the three that waited for it go two (the limit), then one.
    assert [len(keys) for _, keys, _ in fake.sent] == [2, 2, 3, 2]


async def test_an_error_answers_its_own_call_only_and_a_cancelled_caller_is_not_sent() -> None:
    fake = FakeRedis()
    sending = batcher(fake)
    first = asyncio.create_task(sending.run(0, "ping_client", ["k"], ["p"], ["a"]))
    await settle()
    bad = asyncio.create_task(sending.run(0, "ping_client", ["k"], ["p"], ["bad"]))
    gone = asyncio.create_task(sending.run(0, "ping_client", ["k"], ["p"], ["gone"]))
    good = asyncio.create_task(sending.run(0, "ping_client", ["k"], ["p"], ["good"]))
    await settle()
    gone.cancel()
    fake.gate.set()
    assert await first == "a"
    with pytest.raises(ResponseError):
        await bad
    assert await good == "good"
    assert fake.sent[1][2][:2] == [2, 1]


@pytest.mark.both_redis
async def test_the_batch_function_runs_each_call_alone_in_redis(broker: Broker) -> None:
    scripts = broker.core.scripts
    session_id = await make_session(broker)
    keys = broker.core.keys
    partition = keys.session(session_id).partition
    # An ack of an unknown call (a 404 answer), a call whose keys are missing (a Lua error), and the
    # ack again: the error is the second call's alone.
    client_id = "0190f2a0-0000-7000-8000-0000000000ff"
    s = keys.session(session_id)
    call, args = call_names(keys, session_id, "call_x", client_id)
    own, ack_args = layout("ack_call").positional(
        {**call, "tokens": s.tokens, "receipt": s.idempotency("none"), "stream": s.client_calls(client_id)},
        {**args, "token": "", "fp": "", "ttl": 0, "result_ms": 1000, "member": "", "group": "pool"},
    )
    ack_args.append(0)
    # The batch function, called as the batcher calls it.
    replies = await scripts._send(
        ("FCALL", library().batch),
        [*partition.block, *own, *own],
        [3, len(partition.block), "ack_call", len(own), len(ack_args), *ack_args, "ack_call", 0, 0,
         "ack_call", len(own), len(ack_args), *ack_args],
    )  # fmt: skip
    assert [reply[0] for reply in (replies[0], replies[2])] == [b"not_found", b"not_found"]
    assert isinstance(replies[1], ResponseError)
