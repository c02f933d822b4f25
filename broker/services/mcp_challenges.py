"""What a grant's server challenged a session's requests with (`WWW-Authenticate` on a 401, or a 403
`insufficient_scope`), kept for the grant's next sign-in in that session: its `resource_metadata` and
`scope` go to discovery (workers/mcp/sign_in.py), and a step-up asks for the scope already granted with
the one challenged. Kept for the sign-in's wait from the first note; step-ups are counted within it, so a
server that keeps asking for more has the person sign in a bounded number of times."""

from __future__ import annotations

from dataclasses import dataclass

from broker.core import Core
from broker.errors import translate_redis_errors

# The longest challenge kept (a server's header past it is not one to follow).
MAX_CHALLENGE_CHARS = 2048


@dataclass(frozen=True, slots=True)
class Challenge:
    """A server's challenge, as sent, the scope the token it refused had (None: no token, or unknown), and
    whether it asks for a step-up no sign-in was begun for yet."""

    header: str
    granted: str | None
    pending: bool = False


class McpChallenges:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def note(
        self,
        session_id: str,
        grant: str,
        challenge: Challenge,
        *,
        step_up: bool,
        limit: int,
        ttl_ms: int,
    ) -> bool:
        """Keep `challenge` for the grant's next sign-in in the session; False (nothing kept) when it is a
        step-up past `limit` within the record's life. A header past MAX_CHALLENGE_CHARS: ValueError."""
        if len(challenge.header) > MAX_CHALLENGE_CHARS:
            raise ValueError(f"a challenge past {MAX_CHALLENGE_CHARS} characters is not kept")
        (answer,) = await self._core.scripts.run(
            "note_mcp_challenge",
            {"challenge": self._core.keys.mcp_challenge(session_id, grant)},
            {
                "header": challenge.header,
                "granted": challenge.granted or "",
                "step_up": "1" if step_up else "0",
                "limit": limit,
                "ttl_ms": ttl_ms,
            },
        )
        return str(answer) == "noted"

    async def latest(self, session_id: str, grant: str) -> Challenge | None:
        """The challenge kept for the grant's next sign-in in the session, if any."""
        with translate_redis_errors():
            found = await self._core.redis.hmget(
                self._core.keys.mcp_challenge(session_id, grant), ["header", "granted", "pending"]
            )
        header, granted, pending = found
        if header is None:
            return None
        return Challenge(header.decode(), granted.decode() if granted else None, pending is not None)

    async def begun(self, session_id: str, grant: str) -> None:
        """A sign-in was begun for the grant in the session: a step-up noted before is no longer pending."""
        with translate_redis_errors():
            await self._core.redis.hdel(self._core.keys.mcp_challenge(session_id, grant), "pending")
