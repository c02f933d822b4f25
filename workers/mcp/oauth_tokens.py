"""The `mcp` package's `TokenStorage` over a grant's OAuth connection (broker/services/mcp_connections.py):
what `OAuthClientProvider` reads and writes lands sealed in Redis for the session's subject (else the
session), so a sign-in outlives the process that asked for it and serves that person's other sessions.

A stored token's `expires_in` is given back as what is left of it, since the provider counts it from the
moment it reads it. The registered client (dynamic registration) is kept for this storage's life only:
registering again costs a request, not a sign-in."""

from __future__ import annotations

import time

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from broker.services.mcp_connections import McpConnections, owner_of
from broker.services.token_cipher import TokenCipher


class ConnectionTokens:
    """One grant's tokens for one session (`mcp.client.auth.TokenStorage`)."""

    def __init__(
        self,
        connections: McpConnections,
        cipher: TokenCipher,
        *,
        subject: str | None,
        session_id: str,
        grant: str,
        server_url: str,
    ) -> None:
        self._connections = connections
        self._cipher = cipher
        self._subject = subject
        self._session_id = session_id
        self._grant = grant
        self._server_url = server_url
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        owner = owner_of(self._subject, self._session_id)
        stored = await self._connections.tokens(self._cipher, owner, self._server_url)
        if stored is None:
            return None
        token = OAuthToken.model_validate_json(stored)
        record = await self._connections.get_for(owner, self._server_url)
        if record is not None and record.expires_at_ms is not None:
            left_s = max(0, (record.expires_at_ms - _now_ms()) // 1000)
            token = token.model_copy(update={"expires_in": left_s})
        return token

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = None if tokens.expires_in is None else _now_ms() + tokens.expires_in * 1000
        await self._connections.keep(
            self._cipher,
            subject=self._subject,
            session_id=self._session_id,
            grant=self._grant,
            server_url=self._server_url,
            scopes=(tokens.scope or "").split(),
            expires_at_ms=expires_at,
            tokens=tokens.model_dump_json(exclude_none=True).encode(),
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info


def _now_ms() -> int:
    return int(time.time() * 1000)
