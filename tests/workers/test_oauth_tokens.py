"""The `mcp` client's TokenStorage over a grant's connection: tokens kept sealed for the subject (else the
session), shared by the subject's sessions only, and handed back with what is left of their lifetime."""

from __future__ import annotations

import secrets
import uuid

import pytest
from mcp.client.auth import TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import SecretStr

from broker.broker import Broker
from broker.services.token_cipher import TokenCipher
from switchboard.settings import Settings
from workers.mcp.oauth_tokens import ConnectionTokens

pytestmark = pytest.mark.both_redis

SERVER = "https://mcp.example.com/mcp"


def storage(broker: Broker[Settings], cipher: TokenCipher, subject: str | None, session_id: str) -> TokenStorage:
    return ConnectionTokens(
        broker.mcp_connections, cipher, subject=subject, session_id=session_id, grant="kit", server_url=SERVER
    )


async def test_a_subjects_tokens_serve_all_of_its_sessions_and_no_other(broker: Broker[Settings]) -> None:
    cipher = TokenCipher(SecretStr(secrets.token_urlsafe(32)))
    first = storage(broker, cipher, "person-1", str(uuid.uuid4()))
    assert await first.get_tokens() is None
    await first.set_tokens(OAuthToken(access_token="at-1", refresh_token="rt-1", expires_in=3600, scope="read write"))
    again = await storage(broker, cipher, "person-1", str(uuid.uuid4())).get_tokens()
    assert again is not None
    assert (again.access_token, again.refresh_token, again.scope) == ("at-1", "rt-1", "read write")
    assert again.expires_in is not None
    assert 3590 <= again.expires_in <= 3600
    assert await storage(broker, cipher, "person-2", str(uuid.uuid4())).get_tokens() is None
    assert await storage(broker, cipher, None, str(uuid.uuid4())).get_tokens() is None
    listed, _ = await broker.mcp_connections.page("u:person-1", limit=10, after=None, ascending=True)
    assert [(c.grant, c.scopes) for c in listed] == [("kit", ("read", "write"))]


async def test_a_session_without_a_subject_keeps_its_own_and_a_token_without_expiry_stays_so(
    broker: Broker[Settings],
) -> None:
    cipher = TokenCipher(SecretStr(secrets.token_urlsafe(32)))
    session_id = str(uuid.uuid4())
    mine = storage(broker, cipher, None, session_id)
    await mine.set_tokens(OAuthToken(access_token="at-2"))
    got = await storage(broker, cipher, None, session_id).get_tokens()
    assert got is not None
    assert (got.access_token, got.expires_in, got.refresh_token) == ("at-2", None, None)
    assert await storage(broker, cipher, None, str(uuid.uuid4())).get_tokens() is None
    client = OAuthClientInformationFull(client_id="c-1", redirect_uris=["https://sb.example.com/cb"])
    await mine.set_client_info(client)
    assert await mine.get_client_info() == client
