"""A small HTTP answer read whole, and no more of it than its bound: the OAuth flow's documents and token
answers, from servers a grant names (an attacker's, perhaps)."""

from __future__ import annotations

import httpx2


class BodyRefused(Exception):
    """An answer not read: compressed though not asked to be, or past its bound. Its text says which."""


async def bounded_body(response: httpx2.Response, limit: int, what: str) -> bytes:
    """`response`'s body as sent (its request asked for `Accept-Encoding: identity`: a compressed answer
    could grow past the bound inside one chunk), at most `limit` bytes; BodyRefused naming `what` else."""
    if response.headers.get("content-encoding", "identity") != "identity":
        raise BodyRefused(f"{what} answered compressed, which was not asked for")
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > limit:
            raise BodyRefused(f"{what} answered more than {limit} bytes")
    return bytes(body)
