"""The partitions' alarm channels, heard through one pattern subscription per worker (workers/keeper.py).

A script that sets a timer earlier than its partition's alarm publishes the due time (ms, Redis's clock)
on the partition's alarm channel, and one that adds work publishes `w` (broker/keys.py, Channels).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast

from redis.asyncio.client import PubSub
from redis.asyncio.connection import AbstractConnection

from broker.core import Core
from broker.keys import KeySpace


@dataclass(frozen=True, slots=True)
class Alarm:
    """What a partition's alarm channel said: work was added (`work`), or a timer is due at `due_ms`."""

    partition: int
    work: bool = False
    due_ms: int | None = None


class AlarmSubscription:
    """Every partition's alarm channel, subscribed; `close` it when done."""

    def __init__(self, pubsub: PubSub, keys: KeySpace) -> None:
        self._pubsub = pubsub
        self._keys = keys
        self._reconnected = False
        # redis-py makes a dropped connection again under `get_message` and subscribes it again, saying
        # nothing: what was published in between is lost, and only this callback tells. (redis-py types the
        # attribute by its first value, None; once subscribed it holds the connection.)
        connection = cast(AbstractConnection, pubsub.connection)
        connection.register_connect_callback(self._on_connect)  # type: ignore[no-untyped-call]

    async def _on_connect(self, connection: AbstractConnection) -> None:
        self._reconnected = True

    def reconnected(self) -> bool:
        """Whether the connection was made again (and resubscribed) since this was last asked: an alarm
        published meanwhile may have been lost."""
        was, self._reconnected = self._reconnected, False
        return was

    async def get(self, timeout_s: float) -> Alarm | None:
        """The next alarm heard within `timeout_s`, or None (nothing heard, or a message that is no
        partition's alarm). Raises when the connection is lost."""
        message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout_s)
        if message is None or message.get("type") != "pmessage":
            return None
        channel, data = message["channel"], message["data"]
        name = channel.decode() if isinstance(channel, bytes) else channel
        partition = self._keys.partition_of_alarm(name)
        if partition is None:
            return None
        text = data.decode() if isinstance(data, bytes) else data
        if text == "w":
            return Alarm(partition, work=True)
        if text.isdigit():
            return Alarm(partition, due_ms=int(text))
        return None

    async def close(self) -> None:
        await self._pubsub.aclose()


class Alarms:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def subscribe(self, confirm_s: float) -> AlarmSubscription:
        """Every partition's alarm channel (one PSUBSCRIBE): returns once Redis confirmed the subscription
        (TimeoutError past `confirm_s`)."""
        pubsub = self._core.pubsub()
        try:
            await pubsub.psubscribe(self._core.keys.alarm_pattern)
            async with asyncio.timeout(confirm_s):
                while True:
                    message = await pubsub.get_message(timeout=confirm_s)
                    if message is not None and message.get("type") == "psubscribe":
                        return AlarmSubscription(pubsub, self._core.keys)
        except BaseException:
            await pubsub.aclose()
            raise
