"""MCP grants' OAuth connections: kept sealed for the session's subject (else the session), listed by
`GET /v1/mcp/connections` with no token in sight, and forgotten by `DELETE /v1/mcp/connections/{id}`."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Callable

import pytest
from pydantic import SecretStr

from broker.broker import Broker
from broker.errors import BrokerUnavailable
from broker.services.mcp_connections import owner_of
from broker.services.token_cipher import TokenCipher
from switchboard.settings import Settings
from tests.api_client import Api

pytestmark = pytest.mark.both_redis

SERVER = "https://mcp.example.com/mcp"
TOKENS = {"access_token": "at-secret-1", "refresh_token": "rt-secret-2", "token_type": "Bearer"}


@pytest.fixture
def cipher() -> TokenCipher:
    return TokenCipher(SecretStr(secrets.token_urlsafe(32)))


async def keep(
    broker: Broker[Settings], cipher: TokenCipher, subject: str | None, session_id: str, server: str = SERVER
) -> str:
    kept = await broker.mcp_connections.keep(
        cipher,
        subject=subject,
        session_id=session_id,
        grant="linear",
        server_url=server,
        scopes=["read", "write"],
        expires_at_ms=1_900_000_000_000,
        tokens=json.dumps(TOKENS).encode(),
    )
    return kept.id


async def test_a_subjects_connection_is_listed_without_its_tokens_and_forgotten(
    api: Api, broker: Broker[Settings], cipher: TokenCipher
) -> None:
    session_id = str(uuid.uuid4())
    cid = await keep(broker, cipher, "person-7", session_id)
    again = await keep(broker, cipher, "person-7", str(uuid.uuid4()))
    assert again == cid  # another of the subject's sessions signing in replaces the same connection
    listed = await api.key.get("/v1/mcp/connections", params={"subject": "person-7"})
    assert listed.status_code == 200, listed.text
    (item,) = listed.json()["items"]
    assert set(item) == {"id", "grant", "server_url", "subject", "session_id", "scopes", "expires_at", "created_at"}
    assert item["id"] == cid
    assert (item["grant"], item["server_url"], item["subject"], item["session_id"]) == (
        "linear",
        SERVER,
        "person-7",
        None,
    )
    assert item["scopes"] == ["read", "write"]
    assert item["expires_at"].startswith("2030-03-17T")
    assert listed.json()["next_cursor"] is None
    assert "secret" not in listed.text
    opened = await broker.mcp_connections.tokens(cipher, owner_of("person-7", "any"), SERVER)
    assert opened is not None
    assert json.loads(opened) == TOKENS
    assert (await api.key.delete(f"/v1/mcp/connections/{cid}")).status_code == 204
    assert (await api.key.get("/v1/mcp/connections", params={"subject": "person-7"})).json()["items"] == []
    assert await broker.mcp_connections.tokens(cipher, owner_of("person-7", "any"), SERVER) is None
    gone = await api.key.delete(f"/v1/mcp/connections/{cid}")
    assert gone.status_code == 404
    assert f"no MCP connection {cid}" in gone.text


async def test_a_session_without_a_subject_owns_its_connections_and_pages_them(
    api: Api, broker: Broker[Settings], cipher: TokenCipher
) -> None:
    session_id = str(uuid.uuid4())
    ids = {await keep(broker, cipher, None, session_id, f"https://mcp{i}.example.com/mcp") for i in range(3)}
    await keep(broker, cipher, None, str(uuid.uuid4()))
    seen: list[str] = []
    params: dict[str, str | int] = {"session_id": session_id.upper(), "limit": 2}
    while True:
        page = (await api.key.get("/v1/mcp/connections", params=params)).json()
        seen += [item["id"] for item in page["items"]]
        assert all(item["session_id"] == session_id and item["subject"] is None for item in page["items"])
        if page["next_cursor"] is None:
            break
        params["after"] = page["next_cursor"]
    assert sorted(seen) == sorted(ids)
    assert (await api.key.get("/v1/mcp/connections", params={"subject": session_id})).json()["items"] == []


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({}, "give exactly one of the two"),
        ({"subject": "a", "session_id": str(uuid.UUID(int=1))}, "give exactly one of the two"),
        ({"session_id": "not-a-session"}, "session_id: 'not-a-session' is not a session id"),
        ({"session_id": "x" * 65}, "session_id"),
        ({"subject": "s" * 201}, "subject"),
        ({"subject": ""}, "subject"),
    ],
)
async def test_a_listing_asked_badly_is_refused_naming_the_parameter(
    api: Api, params: dict[str, str], named: str
) -> None:
    refused = await api.key.get("/v1/mcp/connections", params=params)
    assert refused.status_code == 400, refused.text
    assert named in refused.json()["error"]["message"]


async def test_forgetting_an_unknown_or_malformed_id_is_a_404(api: Api) -> None:
    for cid in (str(uuid.uuid4()), "nope"):
        missing = await api.key.delete(f"/v1/mcp/connections/{cid}")
        assert missing.status_code == 404, missing.text


def test_sealed_tokens_open_only_for_their_connection_under_their_secret(cipher: TokenCipher) -> None:
    sealed = cipher.seal(b"at-secret", "connection-a")
    assert "at-secret" not in sealed
    assert cipher.open(sealed, "connection-a") == b"at-secret"
    other = TokenCipher(SecretStr(secrets.token_urlsafe(32)))
    altered = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    attempts: list[Callable[[], bytes]] = [
        lambda: cipher.open(sealed, "connection-b"),
        lambda: other.open(sealed, "connection-a"),
        lambda: cipher.open(altered, "connection-a"),
        lambda: cipher.open("2." + sealed[2:], "connection-a"),
        lambda: cipher.open("1.!!", "connection-a"),
    ]
    for attempt in attempts:
        with pytest.raises(BrokerUnavailable) as refused:
            attempt()
        assert "at-secret" not in str(refused.value)
