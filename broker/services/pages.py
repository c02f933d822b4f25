"""Cursor pages over a lex-ordered index of UUIDv7 ids (newest first unless asked otherwise)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.errors import translate_redis_errors
from broker.transport.commands import Commands


@dataclass(frozen=True, slots=True)
class IdPage:
    ids: list[str]
    next_cursor: str | None


async def id_page(redis: Commands, index: str, *, limit: int, after: str | None, ascending: bool) -> IdPage:
    """Ids after `after` (exclusive) in the direction of travel; the cursor is the page's last id."""
    with translate_redis_errors():
        if ascending:
            raw = await redis.lex_range(index, "-" if after is None else f"({after}", "+", limit + 1)
        else:
            raw = await redis.lex_range(index, "+" if after is None else f"({after}", "-", limit + 1, reverse=True)
    ids = [bytes(item).decode() for item in raw]
    return IdPage(ids[:limit], ids[limit - 1] if len(ids) > limit else None)


async def records(redis: Commands, keys: list[str]) -> list[dict[bytes, bytes]]:
    """The hashes at `keys`, in one round trip; a missing one is an empty dict."""
    with translate_redis_errors():
        async with redis.pipeline() as pipe:
            for key in keys:
                pipe.hgetall(key)
            found: list[dict[bytes, bytes]] = await pipe.execute()
    return found
