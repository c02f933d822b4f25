"""Pending MCP sign-ins: what a grant's OAuth flow left waiting for the person's browser, found by the
`state` the authorization server hands back to the callback. A state is drawn at random and stored only
as its SHA-256; it is bound to its session, works once, and runs out with the wait
(`SWITCHBOARD_MCP_AUTHORIZATION_TIMEOUT_S`). A taken, expired or unknown one is refused saying which."""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass

from broker.core import Core

# A lapsed sign-in's tombstone lives this much past its wait, so its link is refused as run out (or used)
# rather than unknown.
_TOMBSTONE_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class PendingAuthorization:
    """A sign-in taken by its state: whose, for which grant and server, and the flow's sealed part."""

    authorization_id: str
    session_id: str
    grant: str
    server_url: str
    expires_at_ms: int
    flow: str


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


class McpAuthorizations:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def begin(
        self, *, authorization_id: str, session_id: str, grant: str, server_url: str, flow: str, wait_s: int
    ) -> tuple[str, int]:
        """A new state for this sign-in and when it runs out (ms). `flow` is what the callback needs to
        finish the exchange, sealed by the caller."""
        state = secrets.token_urlsafe(32)
        fields = {
            "authorization_id": authorization_id,
            "session_id": session_id,
            "grant": grant,
            "server_url": server_url,
            "flow": flow,
        }
        (expires_at,) = await self._core.scripts.run(
            "begin_mcp_authorization",
            {"authorization": self._core.keys.mcp_authorization(_digest(state))},
            {"fields": json.dumps(fields), "wait_ms": wait_s * 1000, "keep_ms": _TOMBSTONE_MS},
        )
        return state, int(expires_at)

    async def take(self, state: str) -> PendingAuthorization:
        """The sign-in `state` names, once; an unknown, used or expired state: InvalidRequest saying which."""
        data = await self._core.scripts.run(
            "take_mcp_authorization", {"authorization": self._core.keys.mcp_authorization(_digest(state))}, {}
        )
        found = {str(data[i]): str(data[i + 1]) for i in range(0, len(data), 2)}
        return PendingAuthorization(
            authorization_id=found["authorization_id"],
            session_id=found["session_id"],
            grant=found["grant"],
            server_url=found["server_url"],
            expires_at_ms=int(found["expires_at"]),
            flow=found["flow"],
        )
