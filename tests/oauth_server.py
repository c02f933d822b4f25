"""An OAuth 2.1 authorization server for the tests, built from the `mcp` package's own server side
(mcp.server.auth: its authorize, token and metadata handlers, PKCE and redirect URI checks) over an
in-memory provider, served on 127.0.0.1. The test plays the person's browser: it GETs the authorization
URL and follows the redirect to Switchboard's callback itself."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from mcp.server import MCPServer
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    IdentityAssertionParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from broker.transport.embedded import free_port
from tests.stack import serve_asgi

CLIENT_ID = "switchboard-test"
CLIENT_SECRET = "client-secret-for-tests"


@dataclass
class MemoryAuthorizationServer:
    """An OAuthAuthorizationServerProvider keeping everything in memory. `iss`: what the redirect says
    its issuer is (None: the real one); `token_delay_s`: how long the token endpoint takes to answer;
    `expires_in`: the life of the access tokens it issues (s); `rotate`: whether a refresh issues a new
    refresh token (the old one then refused). `refreshed`: the refresh tokens it took, in order."""

    # Its address, and its issuer identifier as its metadata writes it.
    issuer: str = ""
    identifier: str = ""
    iss: str | None = None
    token_delay_s: float = 0.0
    expires_in: int = 3600
    # How long a refresh takes to answer, on top of `token_delay_s`.
    refresh_delay_s: float = 0.0
    rotate: bool = True
    refreshed: list[str] = field(default_factory=list)
    # `/mcp`'s gate (`_gated`): tools needing a scope of their own, and a challenge for requests without
    # a token; the 403s it answered.
    scoped_tools: dict[str, str] = field(default_factory=dict)
    challenge: str | None = None
    step_ups: int = 0
    # The scopes its codes grant whatever was asked (None: what was asked), for a server that never grants
    # what it asks for; whether its token answers carry a refresh token.
    grants: list[str] | None = None
    issue_refresh: bool = True
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    exchanged: list[AuthorizationCode] = field(default_factory=list)
    # The resource each refresh token's grant was for (a refresh issues tokens for the same one).
    resources: dict[str, str | None] = field(default_factory=dict)

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=self.grants if self.grants is not None else params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="person-7",
        )
        issuer = self.iss if self.iss is not None else self.identifier
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=issuer)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.token_delay_s:
            await asyncio.sleep(self.token_delay_s)
        self.codes.pop(authorization_code.code, None)
        self.exchanged.append(authorization_code)
        return self._issue(client, authorization_code.scopes, authorization_code.resource, None)

    def _issue(
        self, client: OAuthClientInformationFull, scopes: list[str], resource: str | None, refresh: str | None
    ) -> OAuthToken:
        assert client.client_id is not None
        access = "at-" + secrets.token_urlsafe(16)
        self.access[access] = AccessToken(
            token=access,
            client_id=client.client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.expires_in,
            resource=resource,
        )
        if refresh is None:
            refresh = "rt-" + secrets.token_urlsafe(16)
            self.refresh[refresh] = RefreshToken(token=refresh, client_id=client.client_id, scopes=scopes)
            self.resources[refresh] = resource
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.expires_in,
            refresh_token=refresh if self.issue_refresh else None,
            scope=" ".join(scopes) or None,
        )

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.token_delay_s or self.refresh_delay_s:
            await asyncio.sleep(self.token_delay_s + self.refresh_delay_s)
        self.refreshed.append(refresh_token.token)
        resource = self.resources.get(refresh_token.token)
        if not self.rotate:
            # An omitted refresh token is the old one still (RFC 6749 6).
            return self._issue(client, scopes, resource, refresh_token.token).model_copy(update={"refresh_token": None})
        self.refresh.pop(refresh_token.token, None)
        return self._issue(client, scopes, resource, None)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        raise NotImplementedError

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)


@contextlib.asynccontextmanager
async def authorization_server(
    redirect_uri: str,
    *,
    scopes: list[str] | None = None,
    method: str = "client_secret_post",
    resource_scopes: list[str] | None = None,
    **options: Any,
) -> AsyncIterator[MemoryAuthorizationServer]:
    """An MCP server (`/mcp`, tools `note` and `erase`) that is its own authorization server, as the `mcp`
    package serves one: its Protected Resource Metadata, its authorization server metadata, `/authorize`,
    `/token` and `/register`, and `/mcp` only with a token it issued. Its one pre-registered client
    (CLIENT_ID, CLIENT_SECRET, sent as `method` says) sends browsers back to `redirect_uri`. `scopes`: what
    the authorization server offers; `resource_scopes`: what `/mcp` requires of a token and lists in its
    resource metadata (a token without them is answered 403 `insufficient_scope`). `/never` is a token
    endpoint that never answers, `/huge` one that answers 96 KiB; `/liar-resource` is resource metadata
    naming an authorization server whose metadata names another issuer, `/elsewhere-resource` resource
    metadata for another server. The provider's `scoped_tools` and `challenge` gate `/mcp` further
    (`_gated`)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(base),
        resource_server_url=AnyHttpUrl(base + "/mcp"),
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=scopes),
        # A token issued for another resource is refused, as RFC 8707 means it to be.
        validate_token_resource=True,
        required_scopes=resource_scopes,
    )
    provider = MemoryAuthorizationServer(issuer=base, identifier=str(auth.issuer_url), **options)
    server = MCPServer("notes", auth_server_provider=provider, auth=auth)

    @server.tool()
    def note(text: str) -> str:
        return f"noted: {text}"

    @server.tool()
    def erase(text: str) -> str:
        return f"erased: {text}"

    app = server.streamable_http_app()
    app.router.routes.extend(
        [
            Route("/never", _never, methods=["POST"]),
            Route("/huge", _huge, methods=["POST"]),
            # Resource metadata naming an authorization server (`/liar`) whose metadata names another issuer.
            Route("/liar-resource", lambda request: _liar_resource(base), methods=["GET"]),
            Route("/.well-known/oauth-authorization-server/liar", lambda request: _liar(base), methods=["GET"]),
            Route("/elsewhere-resource", lambda request: _elsewhere(), methods=["GET"]),
        ]
    )
    # Validated from plain values, so its redirect URI is the type the handler compares with.
    provider.clients[CLIENT_ID] = OAuthClientInformationFull.model_validate(
        {
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": method,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "scope": " ".join(scopes) if scopes else None,
        }
    )
    # A handler that never answers must not hold the server open past the test.
    async with serve_asgi(_gated(app, provider, base), port=port, timeout_graceful_shutdown=1):
        yield provider


def _gated(app: ASGIApp, provider: MemoryAuthorizationServer, base: str) -> ASGIApp:
    """`app` with `/mcp` gated as the provider says: a request without a token answered 401 with
    `provider.challenge` (when set) as its `WWW-Authenticate`; a `tools/call` of a tool in
    `provider.scoped_tools` whose token lacks the tool's scope answered 403 `insufficient_scope` naming it
    (as a server asks for a step-up), counted in `provider.step_ups`."""

    async def gated(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/mcp":
            await app(scope, receive, send)
            return
        headers = {name.decode().lower(): value.decode() for name, value in scope["headers"]}
        token = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not token and provider.challenge is not None:
            await _refuse(send, 401, provider.challenge)
            return
        if scope["method"] != "POST":
            await app(scope, receive, send)
            return
        messages = [await receive()]
        while messages[-1].get("more_body", False):
            messages.append(await receive())
        needed = _needed(b"".join(m.get("body", b"") for m in messages), provider.scoped_tools)
        held = provider.access.get(token)
        if needed is not None and held is not None and needed not in held.scopes:
            provider.step_ups += 1
            metadata = base + "/.well-known/oauth-protected-resource/mcp"
            challenge = f'Bearer error="insufficient_scope", scope="{needed}", resource_metadata="{metadata}"'
            await _refuse(send, 403, challenge)
            return
        replay = iter(messages)

        async def again() -> Message:
            return next(replay, None) or await receive()

        await app(scope, again, send)

    return gated


def _needed(body: bytes, scoped: dict[str, str]) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    return scoped.get(str((message.get("params") or {}).get("name")))


async def _refuse(send: Send, status: int, challenge: str) -> None:
    body = json.dumps({"error": "refused"}).encode()
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", challenge.encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _never(request: Request) -> Response:
    # A token endpoint that never answers: the caller's own bound is what ends the wait.
    await asyncio.sleep(3600)
    return Response()


async def _huge(request: Request) -> Response:
    return Response(
        b'{"access_token": "' + b"a" * 98_304 + b'", "token_type": "Bearer"}', media_type="application/json"
    )


def _liar_resource(base: str) -> Response:
    body = {"resource": base + "/mcp", "authorization_servers": [base + "/liar"]}
    return Response(json.dumps(body), media_type="application/json")


def _liar(base: str) -> Response:
    body = {
        "issuer": base,
        "authorization_endpoint": base + "/authorize",
        "token_endpoint": base + "/token",
        "response_types_supported": ["code"],
    }
    return Response(json.dumps(body), media_type="application/json")


def _elsewhere() -> Response:
    body = {"resource": "https://mcp.example.com/mcp", "authorization_servers": ["https://auth.example.com"]}
    return Response(json.dumps(body), media_type="application/json")
