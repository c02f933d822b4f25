"""Deadlines, lapses and the other timers of a partition: the script that reads what is due and arms the
partition's alarm, and the scripts that fire a deadline or a lapse."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from broker.core import Core
from broker.errors import BrokerUnavailable, translate_redis_errors
from broker.keys import PartitionKeys
from broker.scripts.layouts import call_names
from broker.scripts.runner import Group
from broker.services.clients import lapse_client


def _ack_text(seconds: float) -> str:
    return f"the client did not acknowledge the call within {seconds:g} s"


def _result_text(seconds: float) -> str:
    return f"the client acknowledged the call but did not answer within {seconds:g} s"


INTERRUPTED_TEXT = "the server tool was interrupted: the worker running it stopped; it was not retried"


def _sweep_args(partition: PartitionKeys, batch: int) -> tuple[dict[str, str], dict[str, int]]:
    """sweep.lua's own keys and arguments (its partition's come from the runner)."""
    return {"handed": partition.handed}, {"batch": batch}


@dataclass(frozen=True, slots=True)
class Due:
    """What is due in one partition, index by index, and when its next timer comes (None: none set)."""

    next_due_ms: int | None
    deadlines: list[tuple[str, str]]
    """(session id, call id) of each call whose deadline (or server call lease) came."""
    leases: list[tuple[str, str]]
    """(session id, client id) of each registration whose lease came."""
    steps: list[str]
    dequeue: list[str]
    purges: list[str]
    claims: list[str]
    schedules: list[tuple[str, str]]
    """(session id, schedule id) of each schedule whose fire time came."""


@dataclass(frozen=True, slots=True)
class Glance:
    """A partition read without acting: its earliest timer (ms, None: none) and whether work waits;
    `failed` when its Redis node did not answer (a Cluster node down: the others still read)."""

    partition: int
    earliest_ms: int | None
    has_work: bool
    failed: bool = False


class Timers:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def glance(self, partitions: Iterable[int]) -> list[Glance]:
        """Each partition's earliest timer and waiting work, in one pipelined round trip of plain reads
        per Redis node (a worker taking partitions over reads hundreds; most are empty and need no
        visit). The partitions of a node that does not answer come back `failed`; the others are read."""
        found: list[Glance] = []
        for numbers, glances in await self._core.read_by_node(partitions, self._glance):
            if isinstance(glances, BrokerUnavailable):
                found += [Glance(number, None, False, failed=True) for number in numbers]
            else:
                found += glances
        return found

    async def _glance(self, client: Redis, numbers: list[int]) -> list[Glance]:
        # The alarm stands for the indexes: every timer is set through lib/partition.lua's sb_timer, which
        # moves the alarm when the timer comes first, and a sweep leaves it at the earliest timer it did not
        # hand out (or deletes it). A timer removed since only leaves the alarm early, which costs a visit
        # that finds nothing due. What a sweep handed to a keeper that died before acting is behind the
        # alarm; `handed` says so, and the partition is visited at once. Two reads a partition rather
        # than one per index.
        keys = self._core.keys
        with translate_redis_errors():
            async with client.pipeline(transaction=False) as pipe:
                for number in numbers:
                    partition = keys.partition(number)
                    pipe.mget(partition.alarm, partition.handed)
                    pipe.xlen(partition.work)
                replies = await pipe.execute()
        found = []
        for i, number in enumerate(numbers):
            (alarm, handed), length = replies[2 * i], replies[2 * i + 1]
            times = [int(value) for value in (alarm, handed) if value is not None]
            found.append(Glance(number, min(times) if times else None, int(length) > 0))
        return found

    async def sweep(self, partition: int, batch: int) -> Due:
        """The partition's due members (at most `batch` per index), and its alarm armed for what follows."""
        part = self._core.keys.partition(partition)
        return self._due(await self._core.scripts.run("sweep", *_sweep_args(part, batch), partition=part))

    async def sweep_many(self, partitions: list[int], batch: int) -> dict[int, Due | Exception]:
        """`sweep` of each partition, in one pipelined round trip per Redis node (a burst of due partitions,
        thousands of schedules due at one instant); each partition's Due, or the error its sweep met."""
        keys = self._core.keys

        async def read(client: Redis, numbers: list[int]) -> list[list[list[Any] | Exception]]:
            groups: list[Group] = []
            for number in numbers:
                part = keys.partition(number)
                groups.append(("sweep", part, [_sweep_args(part, batch)]))
            return await self._core.scripts.pipelined(client, groups)

        found: dict[int, Due | Exception] = {}
        for numbers, replies in await self._core.read_by_node(partitions, read):
            for i, number in enumerate(numbers):
                reply = replies if isinstance(replies, Exception) else replies[i][0]
                found[number] = reply if isinstance(reply, Exception) else self._due(reply)
        return found

    def _due(self, reply: list[Any]) -> Due:
        keys = self._core.keys
        next_due = int(reply[0])
        deadlines, leases, steps, dequeue, purges, claims, schedules = [
            [str(member) for member in members] for members in reply[1:]
        ]
        return Due(
            None if next_due < 0 else next_due,
            [keys.split_member(member) for member in deadlines],
            [keys.split_member(member) for member in leases],
            steps,
            dequeue,
            purges,
            claims,
            [keys.split_member(member) for member in schedules],
        )

    async def expire_call(self, session_id: str, call_id: str) -> str:
        """Fail the call if its deadline (or, for a server call, its lease) has passed."""
        keys, settings = self._core.keys, self._core.settings
        call, args = call_names(keys, session_id, call_id, "")
        (outcome,) = await self._core.scripts.run(
            "expire_call",
            call,
            {
                **args,
                "ack_text": _ack_text(settings.ack_timeout_s),
                "result_text": _result_text(settings.result_timeout_s),
                "interrupted": INTERRUPTED_TEXT,
                "result_ms": settings.result_timeout_ms,
            },
            partition=keys.session(session_id).partition,
        )
        return str(outcome)

    async def lapse_client(self, session_id: str, client_id: str) -> str:
        """Lapse the registration if its lease ran out ('lapsed'); 'alive' moves its timer on."""
        return await lapse_client(self._core, session_id, client_id)
