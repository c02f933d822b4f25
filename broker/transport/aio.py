"""Small glue over redis-py's async client."""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT


async def command(redis: Redis, *args: str | int | bytes) -> Any:
    """A raw command, for the few whose redis-py stubs are wrong (ZRANGE BYLEX bounds, SRANDMEMBER count)."""
    return await redis.execute_command(*args)  # type: ignore[no-untyped-call]


# Every client here is built with decode_responses=False, so every reply is bytes; redis-py types replies
# as `bytes | str` whatever the client. These say so in one place (a cast: nothing is converted).
Entry = tuple[bytes, dict[bytes, bytes]]


def reply(value: Any) -> bytes | None:
    """A string reply (None for a missing key)."""
    return cast("bytes | None", value)


def record(value: Any) -> dict[bytes, bytes]:
    """A hash reply (HGETALL)."""
    return cast("dict[bytes, bytes]", value)


def members(value: Any) -> list[bytes]:
    """A list or set reply of strings (ZRANGE without scores, SMEMBERS, LRANGE)."""
    return cast("list[bytes]", value)


def entries(value: Any) -> list[Entry]:
    """A stream range reply (XRANGE, XREVRANGE)."""
    return cast("list[Entry]", value)


# What HSET's mapping takes (redis-py types it invariantly, so a dict[str, str] is refused).
Fields = dict[FieldT, EncodableT]
