"""The end of an MCP grant's sign-in, where the authorization server sends the person's browser back
(`GET /v1/mcp/oauth/callback`): the state taken (once), the `iss` checked (RFC 9207), the code exchanged
with the PKCE verifier, `resource`, redirect URI and client the worker recorded, the tokens kept for the
session's subject (else the session), and `mcp_authorization_completed` appended.

The `mcp` package's OAuthClientProvider runs this whole flow in one process, holding the verifier and the
state in memory while it waits for the redirect; here the redirect reaches an API process, perhaps days
after a worker began the flow, so the flow's parts travel sealed in the pending record
(broker/services/mcp_authorizations.py AuthorizationFlow) and this module does the exchange itself, with
the package's models and checks (OAuthMetadata, OAuthClientInformationFull, OAuthToken,
validate_authorization_response_iss). Loaded on the first callback (common/runtime.py imported): the API
starts without the `mcp` package."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import pydantic
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.utils import validate_authorization_response_iss
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

from api.settings import ApiSettings
from broker import Broker
from broker.errors import BrokerUnavailable, InvalidRequest, NotFound, SessionFull
from broker.services.mcp_authorizations import AuthorizationFlow, PendingAuthorization
from broker.services.mcp_connections import TokenEndpoint
from broker.services.token_cipher import TokenCipher
from common.token_endpoint import ExchangeFailed, client_auth, post_form

logger = logging.getLogger(__name__)

# What of an authorization server's error is shown on the person's page.
_SHOWN_ERROR = 200


class SignInRefused(Exception):
    """The sign-in did not complete: why, in words for the person's page. Nothing was stored."""


@dataclass(frozen=True, slots=True)
class Completed:
    grant: str
    server_url: str


async def complete(
    broker: Broker[ApiSettings],
    cipher: TokenCipher | None,
    *,
    state: str,
    code: str | None,
    iss: str | None,
    error: str | None,
    error_description: str | None,
) -> Completed:
    """Finish the sign-in `state` names; SignInRefused saying why it did not."""
    try:
        pending = await broker.mcp_authorizations.take(state)
    except InvalidRequest as refused:
        raise SignInRefused(str(refused)) from None
    # The state is spent from here on: whatever follows fails, the person starts again from a new link.
    if error is not None:
        described = f": {error_description[:_SHOWN_ERROR]}" if error_description else ""
        raise SignInRefused(f"the authorization server did not sign you in ({error[:_SHOWN_ERROR]}{described})")
    if code is None:
        raise SignInRefused("the authorization server sent no code back")
    if await broker.mcp_authorizations.state(pending.session_id, pending.authorization_id) == "declined":
        raise SignInRefused("this sign-in was declined in the session; the agent goes on without the server")
    if not await broker.sessions.exists(pending.session_id):
        raise SignInRefused("the session this sign-in was for is gone")
    if cipher is None:
        raise SignInRefused("this deployment has no SWITCHBOARD_SECRET_KEY, so it keeps no sign-in")
    try:
        flow = AuthorizationFlow.open(cipher, pending.flow, pending.authorization_id)
    except BrokerUnavailable as unopened:
        raise SignInRefused(str(unopened)) from None
    metadata = OAuthMetadata.model_validate(flow.metadata)
    try:
        validate_authorization_response_iss(iss, metadata)
    except OAuthFlowError as mismatch:
        raise SignInRefused(f"the answer did not come from the authorization server asked ({mismatch})") from None
    token = await _exchange(broker, flow, metadata, code)
    await _keep(broker, cipher, pending, flow, metadata, token)
    try:
        await broker.mcp_authorizations.complete(
            pending.session_id, pending.authorization_id, pending.grant, pending.server_url
        )
    except (NotFound, SessionFull) as unrecorded:
        # The session went (or filled) while the person signed in: the tokens are kept all the same (a
        # subject's serve the subject's other sessions; the next step that needs them finds them).
        logger.info("mcp sign-in completed but not recorded in its session: %s", unrecorded)
    return Completed(pending.grant, pending.server_url)


async def _exchange(
    broker: Broker[ApiSettings], flow: AuthorizationFlow, metadata: OAuthMetadata, code: str
) -> OAuthToken:
    client = OAuthClientInformationFull.model_validate(flow.client)
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": flow.redirect_uri,
        "code_verifier": flow.code_verifier,
        "resource": flow.resource,
    }
    form, headers = client_auth(form, client.client_id or "", client.client_secret, client.token_endpoint_auth_method)
    try:
        status, body = await post_form(broker.providers.addresses, str(metadata.token_endpoint), form, headers)
    except ExchangeFailed as failed:
        raise SignInRefused(f"the code could not be exchanged: {failed}") from None
    if status not in (200, 201):
        raise SignInRefused(f"the authorization server refused the code ({status}: {_said(body)})")
    try:
        token = OAuthToken.model_validate_json(body)
    except pydantic.ValidationError:
        raise SignInRefused("the authorization server's answer held no usable token") from None
    # RFC 6749 5.1: an omitted scope is the one asked for (as the `mcp` package records it).
    return token if token.scope is not None else token.model_copy(update={"scope": flow.scope})


async def _keep(
    broker: Broker[ApiSettings],
    cipher: TokenCipher,
    pending: PendingAuthorization,
    flow: AuthorizationFlow,
    metadata: OAuthMetadata,
    token: OAuthToken,
) -> None:
    # What a worker needs to refresh these tokens days from now, without discovering anything again.
    client = OAuthClientInformationFull.model_validate(flow.client)
    endpoint = TokenEndpoint(
        url=str(metadata.token_endpoint),
        client_id=client.client_id or "",
        client_secret=client.client_secret,
        auth_method=client.token_endpoint_auth_method,
        resource=flow.resource,
        scope=token.scope,
    )
    expires_at = None if token.expires_in is None else int(time.time() * 1000) + token.expires_in * 1000
    await broker.mcp_connections.keep(
        cipher,
        subject=flow.subject,
        session_id=pending.session_id,
        grant=pending.grant,
        server_url=pending.server_url,
        scopes=(token.scope or "").split(),
        expires_at_ms=expires_at,
        tokens=token.model_dump_json(exclude_none=True).encode(),
        endpoint=endpoint if token.refresh_token else None,
    )


def _said(body: bytes) -> str:
    # An OAuth error answer names its `error`; anything else is shown cut.
    text = body[:_SHOWN_ERROR].decode("utf-8", "replace")
    return text.replace("\n", " ") or "no body"
