"""Typing glue for redis-py 5, whose shared command stubs type async commands as `Awaitable[T] | T`."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Any, TypeVar

from redis.asyncio import Redis

T = TypeVar("T")


async def aw(value: Awaitable[T] | T) -> T:
    """Await a redis-py async command with its result type intact."""
    if inspect.isawaitable(value):
        return await value
    return value


async def command(redis: Redis, *args: str | int | bytes) -> Any:
    """A raw command, for the few whose redis-py stubs are wrong (ZRANGE BYLEX bounds, SRANDMEMBER count)."""
    return await redis.execute_command(*args)  # type: ignore[no-untyped-call]
