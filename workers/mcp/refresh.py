"""An OAuth grant's tokens refreshed before they run out (OAuth 2.1 4.3, as the MCP authorization
specification asks of clients): the refresh token sent to the token endpoint the sign-in used, with the
client authentication and `resource` recorded then (broker/services/mcp_connections.py TokenEndpoint),
through the one token endpoint fetcher the callback's exchange uses (common/token_endpoint.py: a checked
address, no redirect, bounded in time and size).

One refresh per connection at a time, across workers: a worker claims the connection (a claim that runs
out, so a worker that died holds nothing for long); another that needs it meanwhile waits for that
refresh to land rather than sending the same refresh token again (a server that rotates refresh tokens
takes each once). A rotated refresh token is kept; one the server omits is the old one still (RFC 6749
6). A refresh the server refuses as `invalid_grant` (revoked, run out, used) forgets the connection, so
the next step asks the person to sign in again; any other failure leaves the tokens as they were.

The `mcp` package's OAuthClientProvider refreshes inside one request's retry, holding the tokens in its
own memory; here the tokens live in Redis for every worker, so this uses the package's models (OAuthToken)
and does the one POST itself, as the callback does."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time

import pydantic
from mcp.shared.auth import OAuthToken

from broker.services.mcp_connections import McpConnection, McpConnections
from broker.services.token_cipher import TokenCipher
from common.addresses import ProviderAddresses
from common.token_endpoint import EXCHANGE_TIMEOUT_S, ExchangeFailed, client_auth, post_form

logger = logging.getLogger(__name__)

# A claim holds past the fetch's own bound, so it never runs out while its refresh may still land.
HOLD_MS = int((EXCHANGE_TIMEOUT_S + 5.0) * 1000)
# How often a worker waiting for another's refresh looks whether it landed.
POLL_S = 0.2


class Refresher:
    """Refreshes connections' tokens for one worker."""

    def __init__(self, connections: McpConnections, cipher: TokenCipher, addresses: ProviderAddresses) -> None:
        self._connections = connections
        self._cipher = cipher
        self._addresses = addresses

    async def refresh(self, record: McpConnection) -> bytes | None:
        """`record`'s token set (JSON) once refreshed, here or by another worker; None when it could not
        be (the connection is forgotten when the server refused its refresh token)."""
        claim = secrets.token_urlsafe(16)
        answer = await self._connections.claim_refresh(record.id, claim, HOLD_MS)
        if answer == "gone":
            return None
        if answer == "busy":
            return await self._landed(record)
        return await self._refresh(record, claim)

    async def _landed(self, record: McpConnection) -> bytes | None:
        # Another worker refreshes: a new expiry says it landed, the record gone that it was refused, the
        # claim let go with neither that it failed.
        deadline = time.monotonic() + HOLD_MS / 1000
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            found = await self._connections.with_tokens(self._cipher, record.owner, record.server_url)
            if found is None:
                return None
            now, tokens = found
            if now.expires_at_ms != record.expires_at_ms:
                return tokens
            if not now.refreshing:
                return None  # let go unchanged: that refresh failed, and this step goes on without
        return None

    async def _refresh(self, record: McpConnection, claim: str) -> bytes | None:
        connections = self._connections
        stored = await connections.tokens(self._cipher, record.owner, record.server_url)
        endpoint = await connections.endpoint(self._cipher, record.id)
        current = _token(stored) if stored is not None else None
        if endpoint is None or current is None or not current.refresh_token:
            await connections.settle_refresh(self._cipher, record, claim, "release")
            return None
        form = {"grant_type": "refresh_token", "refresh_token": current.refresh_token, "resource": endpoint.resource}
        form, headers = client_auth(form, endpoint.client_id, endpoint.client_secret, endpoint.auth_method)
        try:
            status, body = await post_form(self._addresses, endpoint.url, form, headers)
        except ExchangeFailed as failed:
            logger.warning("the MCP grant %s's tokens were not refreshed: %s", record.grant, failed)
            await connections.settle_refresh(self._cipher, record, claim, "release")
            return None
        token = _token(body) if status == 200 else None
        if token is None:
            refused = status in (400, 401) and _error_of(body) == "invalid_grant"
            logger.warning(
                "the MCP grant %s's authorization server refused its refresh (%s)%s",
                record.grant,
                status,
                ": its tokens are forgotten, the person will be asked again" if refused else "",
            )
            await connections.settle_refresh(self._cipher, record, claim, "forget" if refused else "release")
            return None
        # RFC 6749 6: an omitted refresh token is the old one still, an omitted scope the one granted.
        token = token.model_copy(
            update={
                "refresh_token": token.refresh_token or current.refresh_token,
                "scope": token.scope if token.scope is not None else current.scope,
            }
        )
        expires_at = None if token.expires_in is None else int(time.time() * 1000) + token.expires_in * 1000
        fresh = token.model_dump_json(exclude_none=True).encode()
        kept = await connections.settle_refresh(
            self._cipher,
            record,
            claim,
            "keep",
            tokens=fresh,
            expires_at_ms=expires_at,
            scopes=(token.scope or "").split(),
        )
        if kept:
            return fresh
        # The claim was lost meanwhile (a new sign-in replaced the tokens): those are the ones to use.
        return await connections.tokens(self._cipher, record.owner, record.server_url)


def _token(body: bytes) -> OAuthToken | None:
    try:
        return OAuthToken.model_validate_json(body)
    except pydantic.ValidationError:
        return None


def _error_of(body: bytes) -> str | None:
    """The `error` of a token endpoint's error answer (RFC 6749 5.2), if it has one."""
    try:
        found = json.loads(body)
    except ValueError:
        return None
    error = found.get("error") if isinstance(found, dict) else None
    return error if isinstance(error, str) else None
