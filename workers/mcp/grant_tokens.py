"""An OAuth grant's token on its requests: the access token the session's owner (its subject, else the
session) got by signing in (api/oauth_callback.py), sent as `Authorization: Bearer` to that grant's server
alone (the hub's pinned client sends a grant's headers only to its own origin). The grant, with the
token, is a connection of its own in the hub (its key digests the headers), so one person's token never
serves another's session.

A token past its `expires_at` is not sent: the server would refuse it, and refreshing is not done yet."""

from __future__ import annotations

import dataclasses
import json
import time

from broker import Broker
from broker.services.mcp_connections import owner_of
from broker.services.token_cipher import TokenCipher
from workers.config import McpGrant

# A token this close to its end is taken as ended: a call begun with it could outlive it.
_MARGIN_MS = 30_000


class GrantTokens:
    """Puts the session owner's stored token on each of its OAuth grants."""

    def __init__(self, broker: Broker, cipher: TokenCipher) -> None:
        self._broker = broker
        self._cipher = cipher

    async def authorized(self, session_id: str, grants: tuple[McpGrant, ...]) -> tuple[McpGrant, ...]:
        """`grants`, each OAuth one carrying its owner's token when there is a usable one (as it was
        otherwise: its server's refusal is what the model is told)."""
        if not any(grant.oauth is not None for grant in grants):
            return grants
        owner = owner_of((await self._broker.sessions.get(session_id)).subject, session_id)
        return tuple([await self._one(owner, grant) for grant in grants])

    async def _one(self, owner: str, grant: McpGrant) -> McpGrant:
        if grant.oauth is None:
            return grant
        connections = self._broker.mcp_connections
        record = await connections.get_for(owner, grant.url)
        if record is None:
            return grant
        if record.expires_at_ms is not None and record.expires_at_ms - _MARGIN_MS <= time.time() * 1000:
            return grant
        stored = await connections.tokens(self._cipher, owner, grant.url)
        if stored is None:
            return grant
        access = json.loads(stored).get("access_token")
        if not isinstance(access, str) or not access:
            return grant
        return dataclasses.replace(grant, headers={**grant.headers, "Authorization": f"Bearer {access}"})
