"""API and worker processes a person can sign in through, and the `mcp` package's own authorization server
beside them (tests/oauth_server.py, served by the test's loop): the fixtures the tests that play a person's
browser through a sign-in share."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

from broker.transport.embedded import free_port
from switchboard.processes import Processes
from tests.e2e.served import process_set
from tests.oauth_server import MemoryAuthorizationServer, authorization_server


@pytest.fixture
async def stack(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Processes, str]]:
    """An API (at the public URL the authorization server sends browsers back to) and a worker that keep
    sealed tokens and may reach the authorization server on 127.0.0.1; the API's URL."""
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    settings = {"secret_key": secrets.token_urlsafe(32), "public_url": public, "provider_allow_private": "true"}
    with process_set(redis_url, tmp_path_factory.mktemp("signing-logs"), **settings) as processes:
        processes.worker()
        processes.api(port)
        yield processes, public


@pytest.fixture
async def server(stack: tuple[Processes, str]) -> AsyncIterator[MemoryAuthorizationServer]:
    """The authorization server and MCP server in one, its callback the stack's."""
    callback = stack[1] + "/v1/mcp/oauth/callback"
    async with authorization_server(callback, scopes=["notes:read"], method="client_secret_basic") as running:
        yield running
