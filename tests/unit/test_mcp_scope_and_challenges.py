"""The scope a sign-in asks for (the challenge's, else the resource's `scopes_supported`, else none;
offline_access where the authorization server offers it; a step-up's union), and a server's Bearer
challenge read by the transport: noted (bounded), and its request answered with an error saying why."""

from __future__ import annotations

import json

import httpx2
import pytest
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata

from workers.config import OAuthAuth
from workers.mcp.challenges import MAX_HEADER_CHARS, MAX_HELD, Challenges
from workers.mcp.sign_in import _named_metadata, scope_of
from workers.mcp.wire import _refused

SERVER = "https://mcp.example.com/mcp"


def metadata(scopes: list[str] | None) -> OAuthMetadata:
    return OAuthMetadata.model_validate(
        {
            "issuer": "https://auth.example.com",
            "authorization_endpoint": "https://auth.example.com/authorize",
            "token_endpoint": "https://auth.example.com/token",
            "scopes_supported": scopes,
        }
    )


def resource(scopes: list[str] | None) -> ProtectedResourceMetadata:
    return ProtectedResourceMetadata.model_validate(
        {"resource": SERVER, "authorization_servers": ["https://auth.example.com"], "scopes_supported": scopes}
    )


@pytest.mark.parametrize(
    ("challenged", "prm", "offered", "expected"),
    [
        # auth/scope-from-www-authenticate: the challenge's, whatever the metadata lists.
        ("files:read", ["a", "b"], ["x"], "files:read"),
        # auth/scope-from-scopes-supported: the resource's list.
        (None, ["a", "b"], ["x"], "a b"),
        # auth/scope-omitted-when-undefined: neither, so none (not the authorization server's own list).
        (None, None, ["x", "y"], None),
        (None, [], None, None),
        # offline_access where the authorization server offers it (once), not where it does not.
        ("files:read", None, ["files:read", "offline_access"], "files:read offline_access"),
        ("files:read offline_access", None, ["offline_access"], "files:read offline_access"),
        (None, ["a"], ["a", "offline_access"], "a offline_access"),
        (None, None, ["offline_access"], None),
    ],
)
def test_the_scope_asked_for(
    challenged: str | None, prm: list[str] | None, offered: list[str] | None, expected: str | None
) -> None:
    assert scope_of(OAuthAuth(), challenged, None, resource(prm), metadata(offered)) == expected


def test_the_grants_scopes_come_first_and_a_step_up_keeps_what_was_granted() -> None:
    auth = OAuthAuth(scopes=("notes:read",))
    assert scope_of(auth, None, None, resource(["other"]), metadata(None)) == "notes:read"
    stepped = scope_of(auth, "notes:admin", "notes:read notes:write", None, metadata(["offline_access"]))
    assert stepped == "notes:read notes:write notes:admin offline_access"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ('Bearer resource_metadata="https://mcp.example.com/.well-known/x"', "https://mcp.example.com/.well-known/x"),
        ('Bearer resource_metadata="https://evil.example.com/.well-known/x"', None),
        ('Bearer resource_metadata="http://mcp.example.com/.well-known/x"', None),
        ('Bearer resource_metadata="https://mcp.example.com:8443/x"', None),
        ('Bearer resource_metadata="http://169.254.169.254/latest/meta-data"', None),
        ('Bearer resource_metadata="https://[::1"', None),
        ('Bearer scope="read"', None),
    ],
)
def test_only_resource_metadata_at_the_servers_own_origin_is_followed(header: str, expected: str | None) -> None:
    answered = httpx2.Response(401, headers={"WWW-Authenticate": header})
    assert _named_metadata(answered, SERVER) == expected


def request(body: object) -> httpx2.Request:
    return httpx2.Request("POST", SERVER, content=json.dumps(body).encode())


def test_a_step_up_refusal_answers_its_request_saying_what_the_server_wants() -> None:
    header = 'Bearer error="insufficient_scope", scope="files:write"'
    answered = httpx2.Response(403, headers={"WWW-Authenticate": header})
    refused = _refused(request({"jsonrpc": "2.0", "id": 7, "method": "tools/call"}), answered, "insufficient_scope")
    assert refused is not None
    assert refused.headers["content-type"] == "application/json"
    error = json.loads(refused.content)
    assert error["id"] == 7
    assert error["error"]["message"] == (
        'the MCP server needs more permission for this (insufficient_scope, scope "files:write"): the person'
        " has to sign in to it again, granting that"
    )


def test_a_refused_token_and_hostile_challenges_are_told_within_bounds() -> None:
    answered = httpx2.Response(401, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    refused = _refused(request({"jsonrpc": "2.0", "id": "a", "method": "ping"}), answered, "invalid_token")
    assert refused is not None
    assert json.loads(refused.content)["error"]["message"] == (
        "the MCP server refused the grant's authorization (401: invalid_token)"
    )
    wide = f'Bearer error="insufficient_scope", scope="{"s" * 5000}"'
    long = httpx2.Response(403, headers={"WWW-Authenticate": wide})
    told = _refused(request({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}), long, "insufficient_scope")
    assert told is not None
    assert len(json.loads(told.content)["error"]["message"]) < 400
    # A notification, a batch or no JSON at all: nothing to answer, the package's own handling stands.
    assert _refused(request({"jsonrpc": "2.0", "method": "notifications/initialized"}), answered, None) is None
    assert _refused(request([{"jsonrpc": "2.0", "id": 1}]), answered, None) is None
    assert _refused(httpx2.Request("POST", SERVER, content=b"\xff"), answered, None) is None


def test_challenges_are_held_once_each_and_bounded() -> None:
    held = Challenges()
    held.note("a", 401, "Bearer x", None)
    assert held.peek("a") is not None
    taken = held.take("a")
    assert taken is not None
    assert (taken.status, taken.header, taken.step_up) == (401, "Bearer x", False)
    assert held.take("a") is None
    held.note("b", 403, "B" * (MAX_HEADER_CHARS + 1), "insufficient_scope")
    assert held.take("b") is None
    for number in range(MAX_HELD + 10):
        held.note(str(number), 403, "Bearer y", "insufficient_scope")
    assert held.take("0") is None
    newest = held.take(str(MAX_HELD + 9))
    assert newest is not None
    assert newest.step_up
