"""Starting an OAuth grant's sign-in, as the MCP authorization specification says: the server's Protected
Resource Metadata (RFC 9728: the challenge's `resource_metadata`, the server asked for one when the caller
has none, else the well-known paths), its
authorization server's metadata (RFC 8414, then OpenID discovery), a client id (Switchboard's Client ID
Metadata Document when the public URL is https and the server takes one; else the grant's pre-registered
client; else a dynamic registration), PKCE (S256), `resource` and a scope (`scope_of`). The flow is
recorded sealed under a fresh state (broker/services/mcp_authorizations.py) and the person is given the
authorization URL.

The `mcp` package's OAuthClientProvider does all this inside one request's retry, keeping the verifier
and the state in its memory until the redirect comes back to the same process; here the redirect reaches
the API's callback (api/oauth_callback.py), perhaps days later, so the discovery and client choice use the
package's helpers and models, and what the callback needs travels sealed with the state.

Every document is fetched through the pinned client (workers/pinned.py): an address a stranger's
metadata names is checked as a grant's own is, no redirect is followed, each fetch is bounded in time
(`FETCH_TIMEOUT_S`) and size (`MAX_DOCUMENT_BYTES`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlencode

import httpx2
import pydantic
from mcp import types as mt
from mcp.client.auth import PKCEParameters
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_info_from_metadata_url,
    create_client_registration_request,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    get_client_metadata_scopes,
    is_valid_client_metadata_url,
    issuers_match,
    union_scopes,
)
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from pydantic import AnyUrl, HttpUrl

from broker.errors import AddressRefused
from broker.services.mcp_authorizations import AuthorizationFlow, McpAuthorizations
from broker.services.token_cipher import TokenCipher
from common.addresses import ProviderAddresses
from common.bounded_body import BodyRefused, bounded_body
from common.codec import dumps
from common.oauth_addresses import callback_url, client_metadata_url
from workers.config import OAuthAuth
from workers.pinned import pinned_client, refused

M = TypeVar("M", bound=pydantic.BaseModel)
logger = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0
MAX_DOCUMENT_BYTES = 65_536
_WHAT = "the authorization server"
_IDENTITY = {"Accept-Encoding": "identity"}
# What Switchboard's client does (its client metadata document says the same).
_GRANT_TYPES = ("authorization_code", "refresh_token")
# The request that draws a protected server's challenge: the first one a client of the current protocol
# sends (the `mcp` package's probe), carrying no token. Its answer is read only for the 401's header.
_PROBE = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}
_PROBE_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": mt.LATEST_PROTOCOL_VERSION,
    "Mcp-Method": "server/discover",
}


class SignInUnavailable(Exception):
    """The sign-in could not be started: why, in words for the model and the log."""


def unavailable(error: TimeoutError | AddressRefused | httpx2.HTTPError, url: str) -> SignInUnavailable:
    """A fetch of `url` that failed, as why the sign-in could not be started."""
    if isinstance(error, TimeoutError):
        return SignInUnavailable(f"{url} did not answer within {FETCH_TIMEOUT_S:g} s")
    if isinstance(error, AddressRefused):
        return SignInUnavailable(str(error))
    why = refused(error)
    return SignInUnavailable(str(why) if why is not None else f"{url} could not be reached: {error}")


@dataclass(frozen=True, slots=True)
class Begun:
    """A sign-in waiting for the person: the link to give them, and when it runs out (ms)."""

    authorization_id: str
    authorization_url: str
    expires_at_ms: int


def _named_metadata(answered: httpx2.Response, server_url: str) -> str | None:
    """The challenge's `resource_metadata`, when it is at the server's own origin: one elsewhere would
    have a stranger's challenge send the worker to any address it names (a private one too, where those
    are allowed for the grant's own), so it is passed over for the well-known paths."""
    named = extract_resource_metadata_from_www_auth(answered)
    if named is None:
        return None
    try:
        there, here = httpx2.URL(named), httpx2.URL(server_url)
    except httpx2.InvalidURL:
        return None
    if (there.scheme, there.host, there.port) != (here.scheme, here.host, here.port):
        logger.info("the challenge of %s names resource metadata at another origin, not fetched", server_url)
        return None
    return named


def scope_of(
    auth: OAuthAuth,
    challenged: str | None,
    granted: str | None,
    resource: ProtectedResourceMetadata | None,
    metadata: OAuthMetadata,
) -> str | None:
    """The scope a sign-in asks for, as the MCP authorization specification chooses it: the challenge's
    `scope`, else the resource metadata's `scopes_supported`, else none (the parameter omitted; the
    authorization server's own list is not taken for the resource's). The grant's `scopes` come first,
    and a step-up keeps what was granted before (the union, SEP-2350). `offline_access` is added where
    the authorization server lists it and something is asked for (SEP-2207), so the tokens can be
    refreshed."""
    asked = union_scopes(union_scopes(" ".join(auth.scopes) or None, granted), challenged)
    if asked is None and resource is not None and resource.scopes_supported:
        asked = " ".join(resource.scopes_supported)
    if asked is None:
        return None
    # Given as the chosen scope, the package's helper only adds offline_access where it is offered.
    return get_client_metadata_scopes(asked, None, metadata, list(_GRANT_TYPES))


class SignIns:
    """Starts sign-ins for one worker (its address check, the deployment's public URL and secret)."""

    def __init__(
        self,
        authorizations: McpAuthorizations,
        cipher: TokenCipher,
        addresses: ProviderAddresses,
        public_url: HttpUrl,
        wait_s: int,
    ) -> None:
        self._authorizations = authorizations
        self._cipher = cipher
        self._addresses = addresses
        self._public_url = public_url
        self._wait_s = wait_s

    async def begin(
        self,
        *,
        session_id: str,
        subject: str | None,
        grant: str,
        server_url: str,
        auth: OAuthAuth,
        challenge: str | None = None,
        granted: str | None = None,
    ) -> Begun:
        """Discover, pick the client, record the flow; the authorization URL. `challenge`: the server's
        `WWW-Authenticate` header, when it answered 401 (or 403 `insufficient_scope`; else the server is
        asked, as a client without a token would: the header may name metadata no well-known path has);
        `granted`: the scope the person's current tokens have, kept in a step-up's. SignInUnavailable
        saying why it could not."""
        if challenge is None:
            challenge = await self._challenge(server_url)
        answered = httpx2.Response(401, headers={"WWW-Authenticate": challenge} if challenge else {})
        resource = await self._resource(_named_metadata(answered, server_url), server_url)
        issuer = str(resource.authorization_servers[0]) if resource is not None else None
        metadata = await self._metadata(issuer, server_url)
        scope = scope_of(auth, extract_scope_from_www_auth(answered), granted, resource, metadata)
        client = await self._client(metadata, auth, scope)
        pkce = PKCEParameters.generate()
        flow = AuthorizationFlow(
            metadata=metadata.model_dump(mode="json", exclude_none=True),
            client=client.model_dump(mode="json", exclude_none=True),
            code_verifier=pkce.code_verifier,
            redirect_uri=callback_url(self._public_url),
            resource=str(resource.resource) if resource is not None else server_url,
            scope=scope,
            subject=subject,
        )
        authorization_id = str(uuid.uuid4())
        state, expires_at = await self._authorizations.begin(
            authorization_id=authorization_id,
            session_id=session_id,
            grant=grant,
            server_url=server_url,
            flow=flow.seal(self._cipher, authorization_id),
            wait_s=self._wait_s,
        )
        query = {
            "response_type": "code",
            "client_id": client.client_id or "",
            "redirect_uri": flow.redirect_uri,
            "state": state,
            "code_challenge": pkce.code_challenge,
            "code_challenge_method": "S256",
            "resource": flow.resource,
            **({"scope": scope} if scope else {}),
            # OpenID Connect asks for consent wherever offline_access is asked for (as the `mcp` package does).
            **({"prompt": "consent"} if scope and "offline_access" in scope.split() else {}),
        }
        endpoint = str(metadata.authorization_endpoint)
        joiner = "&" if "?" in endpoint else "?"
        return Begun(authorization_id, endpoint + joiner + urlencode(query), expires_at)

    async def _challenge(self, server_url: str) -> str | None:
        """The `WWW-Authenticate` of the server's 401 to a request without a token; None when it answers
        anything else (then the well-known paths are all there is)."""
        try:
            async with (
                asyncio.timeout(FETCH_TIMEOUT_S),
                pinned_client(server_url, self._addresses, FETCH_TIMEOUT_S, "the MCP server") as http,
                http.stream("POST", server_url, content=dumps(_PROBE), headers=_PROBE_HEADERS | _IDENTITY) as answer,
            ):
                # The body is left unread: only the header is wanted, and the server's answer may not end.
                if answer.status_code != 401:
                    return None
                return answer.headers.get("www-authenticate")
        except (TimeoutError, AddressRefused, httpx2.HTTPError) as error:
            raise unavailable(error, server_url) from None

    async def _resource(self, named: str | None, server_url: str) -> ProtectedResourceMetadata | None:
        # A server that publishes no resource metadata is an older one: its own origin is asked for the
        # authorization server's metadata (the package's legacy path).
        for url in build_protected_resource_metadata_discovery_urls(named, server_url):
            found = await self._document(url, ProtectedResourceMetadata)
            if found is None:
                continue
            # RFC 9728 3.3: metadata for another resource would have the person grant a token for it.
            if not check_resource_allowed(resource_url_from_server_url(server_url), str(found.resource)):
                raise SignInUnavailable(f"{url} describes the resource {found.resource}, not {server_url}")
            return found
        return None

    async def _metadata(self, issuer: str | None, server_url: str) -> OAuthMetadata:
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
            found = await self._document(url, OAuthMetadata)
            if found is None:
                continue
            # RFC 8414 3.3: metadata naming another issuer than the one asked is not that server's.
            if issuer is not None and not issuers_match(str(found.issuer), issuer):
                raise SignInUnavailable(f"{url} names the issuer {found.issuer}, not {issuer}")
            if found.code_challenge_methods_supported is not None and (
                "S256" not in found.code_challenge_methods_supported
            ):
                raise SignInUnavailable(f"{_WHAT} {found.issuer} does not offer PKCE with S256")
            return found
        raise SignInUnavailable(f"no authorization server metadata found for {server_url}")

    async def _client(self, metadata: OAuthMetadata, auth: OAuthAuth, scope: str | None) -> OAuthClientInformationFull:
        redirect = [AnyUrl(callback_url(self._public_url))]
        document = client_metadata_url(self._public_url)
        if metadata.client_id_metadata_document_supported and is_valid_client_metadata_url(document):
            return create_client_info_from_metadata_url(document, redirect)
        if auth.client_id is not None:
            methods = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
            method = "none"
            if auth.client_secret is not None:
                method = "client_secret_basic" if "client_secret_basic" in methods else "client_secret_post"
            return OAuthClientInformationFull(
                client_id=auth.client_id,
                client_secret=auth.client_secret,
                token_endpoint_auth_method=method,
                redirect_uris=redirect,
            )
        if metadata.registration_endpoint is None:
            raise SignInUnavailable(
                f"{_WHAT} {metadata.issuer} takes neither a client metadata document (SWITCHBOARD_PUBLIC_URL must be"
                " https) nor a dynamic registration: give the grant a client_id"
            )
        wanted = OAuthClientMetadata(
            redirect_uris=redirect,
            token_endpoint_auth_method="none",  # noqa: S106 (a public client: PKCE, no secret)
            grant_types=list(_GRANT_TYPES),
            response_types=["code"],
            client_name="Switchboard",
            scope=scope,
        )
        request = create_client_registration_request(metadata, wanted, str(metadata.issuer))
        status, body = await self._send("POST", str(request.url), request.content, dict(request.headers))
        if status not in (200, 201):
            raise SignInUnavailable(f"{_WHAT} refused the registration ({status})")
        try:
            return OAuthClientInformationFull.model_validate_json(body)
        except pydantic.ValidationError:
            raise SignInUnavailable(f"{_WHAT}'s registration answer is not a client") from None

    async def _document(self, url: str, model: type[M]) -> M | None:
        """The document at `url` as `model`, or None when it is not there (any answer but a 200 one that
        parses). An address refused, or no answer in time: SignInUnavailable."""
        status, body = await self._send("GET", url, b"", dict(create_oauth_metadata_request(url).headers))
        if status != 200:
            return None
        try:
            return model.model_validate_json(body)
        except pydantic.ValidationError:
            return None

    async def _send(self, method: str, url: str, content: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        try:
            async with (
                asyncio.timeout(FETCH_TIMEOUT_S),
                pinned_client(url, self._addresses, FETCH_TIMEOUT_S, _WHAT) as http,
                # Read as sent (a compressed answer would grow past the bound inside one chunk).
                http.stream(method, url, content=content or None, headers=headers | _IDENTITY) as answer,
            ):
                return answer.status_code, await bounded_body(answer, MAX_DOCUMENT_BYTES, url)
        except BodyRefused as refused_body:
            raise SignInUnavailable(str(refused_body)) from None
        except (TimeoutError, AddressRefused, httpx2.HTTPError) as error:
            raise unavailable(error, url) from None
