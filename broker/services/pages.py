"""Cursor pages over a lex-ordered index of UUIDv7 ids (newest first unless asked otherwise)."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from broker.errors import translate_redis_errors
from broker.transport.aio import command


@dataclass(frozen=True, slots=True)
class IdPage:
    ids: list[str]
    next_cursor: str | None


async def id_page(redis: Redis, index: str, *, limit: int, after: str | None, ascending: bool) -> IdPage:
    """Ids after `after` (exclusive) in the direction of travel; the cursor is the page's last id."""
    # Raw ZRANGE: redis-py's stub types the BYLEX bounds as ints.
    if ascending:
        bounds = ["-" if after is None else f"({after}", "+"]
    else:
        bounds = ["+" if after is None else f"({after}", "-", "REV"]
    with translate_redis_errors():
        raw = await command(redis, "ZRANGE", index, *bounds, "BYLEX", "LIMIT", 0, limit + 1)
    ids = [bytes(item).decode() for item in raw]
    return IdPage(ids[:limit], ids[limit - 1] if len(ids) > limit else None)


async def records(redis: Redis, keys: list[str]) -> list[dict[bytes, bytes]]:
    """The hashes at `keys`, in one round trip; a missing one is an empty dict."""
    with translate_redis_errors():
        async with redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hgetall(key)
            found: list[dict[bytes, bytes]] = await pipe.execute()
    return found
