"""A sign-in begun with no challenge at hand (a step that has not yet been refused) asks the server first, as
a client without a token would: its 401's `WWW-Authenticate` may name resource metadata that no well-known
path serves (the conformance suite's auth/metadata-var3)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from broker.broker import Broker
from switchboard.settings import Settings
from tests.api.test_mcp_oauth_sign_in import api, server, sign_ins
from tests.api_client import Api
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET, MemoryAuthorizationServer
from tests.stack import serve_asgi
from workers.config import OAuthAuth
from workers.mcp import sign_in
from workers.mcp.sign_in import SignInUnavailable

pytestmark = pytest.mark.private_providers
__all__ = ["api", "server"]

_PRM = "/custom/metadata/location.json"


class Protected:
    """An MCP server whose resource metadata is only where its challenge says (`resource`: what that
    metadata says it describes, `authorization_server` its one authorization server); every request is
    kept in `seen`."""

    def __init__(self, authorization_server: str, resource: str | None = None, *, silent: bool = False) -> None:
        self.authorization_server = authorization_server
        self.resource = resource
        # Never answers a request to /mcp.
        self.silent = silent
        self.base = ""
        self.seen: list[tuple[str, str, dict[str, str]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = {key.decode(): value.decode() for key, value in scope["headers"]}
        self.seen.append((scope["method"], scope["path"], headers))
        if scope["method"] == "POST" and scope["path"] == "/mcp":
            if self.silent:
                await asyncio.sleep(3600)
            challenge = f'Bearer error="invalid_token", resource_metadata="{self.base}{_PRM}"'
            await self._answer(send, 401, b"", [(b"www-authenticate", challenge.encode())])
        elif scope["method"] == "GET" and scope["path"] == _PRM:
            body = {
                "resource": self.resource or self.base + "/mcp",
                "authorization_servers": [self.authorization_server],
            }
            await self._answer(send, 200, json.dumps(body).encode(), [(b"content-type", b"application/json")])
        else:
            await self._answer(send, 404, b"", [])

    @staticmethod
    async def _answer(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def protected(
    authorization_server: str, resource: str | None = None, *, silent: bool = False
) -> AsyncIterator[Protected]:
    app = Protected(authorization_server, resource, silent=silent)
    # A handler that never answers must not hold the server open past the test.
    async with serve_asgi(app, timeout_graceful_shutdown=1) as base:
        app.base = base
        yield app


async def test_the_servers_own_challenge_names_its_metadata(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await api.session()
    async with protected(server.issuer) as mcp_server:
        begun = await sign_ins(broker).begin(
            session_id=session.id,
            subject=None,
            grant="notes",
            server_url=mcp_server.base + "/mcp",
            auth=OAuthAuth(client_id=CLIENT_ID, client_secret=CLIENT_SECRET),
        )
    url = httpx.URL(begun.authorization_url)
    assert url.params["resource"] == mcp_server.base + "/mcp"
    assert url.params["client_id"] == CLIENT_ID
    # The server was asked once, without a token, then its metadata where the challenge said: no
    # well-known path of its was needed.
    (probe, metadata) = mcp_server.seen
    assert probe[:2] == ("POST", "/mcp")
    assert "authorization" not in probe[2]
    assert probe[2]["mcp-method"] == "server/discover"
    assert metadata[:2] == ("GET", _PRM)


async def test_a_challenge_naming_metadata_for_another_server_is_refused(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer
) -> None:
    session = await api.session()
    async with protected(server.issuer, resource="https://mcp.example.com/mcp") as mcp_server:
        with pytest.raises(SignInUnavailable, match=r"describes the resource https://mcp\.example\.com/mcp"):
            await sign_ins(broker).begin(
                session_id=session.id,
                subject=None,
                grant="notes",
                server_url=mcp_server.base + "/mcp",
                auth=OAuthAuth(client_id=CLIENT_ID, client_secret=CLIENT_SECRET),
            )
    assert server.exchanged == []


async def test_a_server_that_never_answers_the_probe_is_given_up_on_in_bounded_time(
    api: Api, broker: Broker[Settings], server: MemoryAuthorizationServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sign_in, "FETCH_TIMEOUT_S", 0.5)
    session = await api.session()
    async with protected(server.issuer, silent=True) as mcp_server:
        with pytest.raises(SignInUnavailable, match=r"did not answer within 0\.5 s"):
            await sign_ins(broker).begin(
                session_id=session.id,
                subject=None,
                grant="notes",
                server_url=mcp_server.base + "/mcp",
                auth=OAuthAuth(client_id=CLIENT_ID, client_secret=CLIENT_SECRET),
            )
    assert [path for _, path, _ in mcp_server.seen] == ["/mcp"]
