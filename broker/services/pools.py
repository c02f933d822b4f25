"""Worker pools: many processes serving one registration, each call handed to exactly one of them.

Each member reads the registration's call stream through the consumer group `POOL_GROUP`, as a consumer
of its own. A member holds the calls it was handed until it acks them (the ack settles the entry, and only
the holder's ack counts); a call handed over but not acked within `pool_claim_s` goes to the next member
that asks (XAUTOCLAIM), so a member that took a call and died costs the call a claim interval, not its ack
deadline. The session's event stream still shows every call to observers.
"""

from __future__ import annotations

from redis.exceptions import ResponseError

from broker.core import Core
from broker.errors import translate_redis_errors
from broker.keys import POOL_GROUP
from common.codec import uuid7

# The most calls a member may hold unacked, unless it asks for fewer: the rest wait for another member.
MAX_PREFETCH = 64


class Pools:
    def __init__(self, core: Core) -> None:
        self._core = core

    @staticmethod
    def new_member() -> str:
        """A name for a member joining a pool: a consumer of the group, unique for the deployment."""
        return "m-" + uuid7()

    async def take(
        self, session_id: str, client_id: str, member: str, *, reclaim: bool, prefetch: int = MAX_PREFETCH
    ) -> list[str]:
        """The `client_tool_dispatched` events of the calls handed to `member` now, so that it holds at
        most `prefetch` unacked: new ones, and when `reclaim`, those another member left unacked past the
        claim interval. NotFound when the session or the registration is gone, which ends the stream."""
        keys = self._core.keys
        s = keys.session(session_id)
        settings = self._core.settings
        handed = await self._core.scripts.run(
            "pool_take",
            {"stream": s.client_calls(client_id), "calls": s.calls, "client": s.client(client_id), "meta": s.meta},
            {
                "group": POOL_GROUP,
                "member": member,
                "sid": session_id,
                "cid": client_id,
                "prefetch": prefetch,
                "reclaim": int(reclaim),
                "claim_ms": round(settings.pool_claim_s * 1000),
            },
        )
        return [str(event) for event in handed]

    async def leave(self, session_id: str, client_id: str, member: str) -> None:
        """Forget a member whose stream ended. One still holding unacked calls is kept: its calls stay in
        the group until another member reclaims them (deleting the consumer would drop them)."""
        stream = self._core.keys.session(session_id).client_calls(client_id)
        redis = self._core.redis
        with translate_redis_errors():
            try:
                held = await redis.xpending_range(stream, POOL_GROUP, "-", "+", 1, member)
            except ResponseError as error:
                if "NOGROUP" in str(error):  # the stream and its group went with the session
                    return
                raise
            if not held:
                await redis.xgroup_delconsumer(stream, POOL_GROUP, member)
