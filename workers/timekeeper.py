"""Turns expired keys into failures: expiry notifications for promptness, a sweeper for the guarantee.

Each pass of the sweeper reads the due members of the timer indexes (deadlines, leases, continuations
owed a job, deleted sessions to purge) and runs the same idempotent script a notification would, so a
missed notification, a worker that died mid-way, or Redis with notifications switched off costs at most
one sweep interval. Between sweeps the sweeper sleeps until the earliest timer is due (at most an
interval, at least 5 ms), so it is what keeps deadlines precise, notifications or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.exceptions import ResponseError

from broker import Broker
from broker.aio import command

logger = logging.getLogger(__name__)

_BATCH = 500
# The closest two sweeps come, however close together timers fall due: one sweep takes them all.
_MIN_SWEEP_GAP_S = 0.005


class Timekeeper:
    """Listens for expired keys (unless `SWITCHBOARD_EXPIRY_NOTIFICATIONS` is false: then it neither
    switches them on nor listens) and sweeps the timer indexes."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._sweep_forever(), name="timekeeper-sweep")]
        if self._broker.settings.expiry_notifications:
            await self._enable_notifications()
            self._tasks.append(asyncio.create_task(self._listen(), name="timekeeper-listen"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def sweep(self) -> int:
        """One pass over every timer index; returns how many members it acted on."""
        broker, keys = self._broker, self._broker.core.keys
        timers, perform = broker.timers, broker.work.perform
        acted = 0
        for member in await timers.due(keys.deadlines, _BATCH):
            acted += 1
            await perform(await timers.expire_call(*keys.split_member(member)))
        for member in await timers.due(keys.leases, _BATCH):
            acted += 1
            await perform(await timers.lapse_client(*keys.split_member(member)))
        for session_id in await timers.due(keys.steps, _BATCH):
            acted += 1
            await perform(await broker.runs.reclaim(session_id))
        for session_id in await timers.due(keys.dequeue, _BATCH):
            acted += 1
            await perform(await broker.runs.dequeue(session_id))
        grace_ms = round(broker.settings.continuation_grace_s * 1000)
        left = await timers.due(keys.work, _BATCH, older_than_ms=grace_ms)
        if left:
            acted += len(left)
            logger.info("performing %d pieces of work their owners left behind", len(left))
            await perform(left)
        for session_id in await timers.due(keys.purges, 20):
            acted += 1
            await broker.sessions.purge(session_id)
        return acted

    async def on_expired(self, key: str) -> None:
        parsed = self._broker.core.keys.parse_expired(key)
        if parsed is None:
            return
        kind, session_id, ident = parsed
        timers = self._broker.timers
        if kind == "deadline":
            owed = await timers.expire_call(session_id, ident)
        else:
            owed = await timers.lapse_client(session_id, ident)
        await self._broker.work.perform(owed)

    async def _enable_notifications(self) -> None:
        redis = self._broker.core.redis
        try:
            current = (await redis.config_get("notify-keyspace-events")).get("notify-keyspace-events", "")
            flags = current.decode() if isinstance(current, bytes) else str(current)
            if not ("E" in flags and ("x" in flags or "A" in flags)):
                await redis.config_set("notify-keyspace-events", "".join(sorted(set(flags) | {"E", "x"})))
        except ResponseError as error:
            # Managed Redis often forbids CONFIG: deadlines then rely on the sweeper alone.
            logger.warning("could not enable expiry notifications (%s); the sweeper keeps deadlines", error)

    async def _listen(self) -> None:
        redis = self._broker.core.redis
        db = int(redis.connection_pool.connection_kwargs.get("db", 0))
        channel = f"__keyevent@{db}__:expired"
        while True:
            pubsub = redis.pubsub()
            try:
                await pubsub.subscribe(channel)
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None and message.get("type") == "message":
                        data = message["data"]
                        await self.on_expired(data.decode() if isinstance(data, bytes) else str(data))
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("expiry listener failed; the sweeper covers deadlines while it reconnects")
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await command(redis, "PING")
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py 5 leaves it unannotated

    async def _sweep_forever(self) -> None:
        interval = self._broker.settings.sweep_interval_s
        keys = self._broker.core.keys
        timed = [keys.deadlines, keys.leases, keys.steps, keys.dequeue]
        while True:
            wait = interval
            try:
                await self.sweep()
                # Sleep until the next timer is due rather than a whole interval: deadlines fire within
                # a few ms even where expiry notifications come late (Redis expires keys by sampling, so
                # with many keys carrying TTLs a notification can trail its key's expiry by seconds).
                due = await self._broker.timers.next_due_s(timed)
                if due is not None:
                    wait = min(interval, max(_MIN_SWEEP_GAP_S, due))
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("sweep failed; trying again")
            await asyncio.sleep(wait)
