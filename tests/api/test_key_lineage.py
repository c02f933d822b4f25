"""A minted key never outlives or outranks the key that minted it: its expiry is at most its parent's,
and revoking (or expiring) a key ends every key minted under it, however deep."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from broker.services.credentials import MAX_KEY_DEPTH
from tests.api_client import Api

MINTED_FIELDS = {"created_at", "expires_at", "id", "label", "permissions", "prefix", "secret"}


def later(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


async def mint(http: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await http.post("/v1/api-keys", json={"label": "child", "permissions": ["session.read"], **body})


async def minted(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    answer = await mint(http, **body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    assert set(created) == MINTED_FIELDS  # the Subako wire shape, unchanged
    return created


async def works(api: Api, secret: str) -> bool:
    async with api.stack.client(secret) as http:
        status = (await http.get("/v1/sessions")).status_code
    assert status in (200, 401)
    return status == 200


async def listing(api: Api) -> list[dict[str, Any]]:
    answer = await api.key.get("/v1/api-keys", params={"limit": 100})
    assert answer.status_code == 200, answer.text
    assert answer.json()["next_cursor"] is None
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def as_ms(stamp: str) -> int:
    return round(datetime.fromisoformat(stamp).timestamp() * 1000)


async def test_a_key_minted_without_expires_at_under_an_expiring_key_expires_with_it(api: Api) -> None:
    parent = await minted(api.key, permissions=["session.read", "workspace.read"], expires_at=later(2))
    async with api.stack.client(parent["secret"]) as as_parent:
        child = await minted(as_parent, permissions=["session.read", "workspace.read"])
        async with api.stack.client(child["secret"]) as as_child:
            grandchild = await minted(as_child)
    assert child["expires_at"] is not None
    assert as_ms(child["expires_at"]) == as_ms(parent["expires_at"])
    assert as_ms(grandchild["expires_at"]) == as_ms(parent["expires_at"])
    assert await works(api, child["secret"])
    assert await works(api, grandchild["secret"])
    await asyncio.sleep(max(0.0, as_ms(parent["expires_at"]) / 1000 - datetime.now(UTC).timestamp()) + 0.2)
    for key in (parent, child, grandchild):
        assert not await works(api, key["secret"])


async def test_a_key_may_not_ask_to_outlive_the_key_that_mints_it(api: Api) -> None:
    expires = later(600)
    parent = await minted(api.key, permissions=["session.read"], expires_at=expires)
    before = len(await listing(api))
    async with api.stack.client(parent["secret"]) as as_parent:
        for asked in (None, later(601), "2999-01-01T00:00:00Z"):
            refused = await mint(as_parent, expires_at=asked)
            assert refused.status_code == 400, refused.text
            error = refused.json()["error"]
            assert error["code"] == "invalid_request"
            assert error["message"].startswith("expires_at: a key expires no later than the key that mints it")
            assert parent["expires_at"][:19] in error["message"]
        # Nothing was minted by the refused requests.
        assert len(await listing(api)) == before
        # As late as the parent, or earlier, is taken as asked.
        same = await minted(as_parent, expires_at=parent["expires_at"])
        assert as_ms(same["expires_at"]) == as_ms(parent["expires_at"])
        sooner = await minted(as_parent, expires_at=later(60))
        assert as_ms(sooner["expires_at"]) < as_ms(parent["expires_at"])


async def test_under_a_key_that_never_expires_the_expiry_is_as_asked(api: Api) -> None:
    parent = await minted(api.key, permissions=["session.read"])
    assert parent["expires_at"] is None
    async with api.stack.client(parent["secret"]) as as_parent:
        assert (await minted(as_parent))["expires_at"] is None
        assert (await minted(as_parent, expires_at=None))["expires_at"] is None
        assert (await minted(as_parent, expires_at="2999-01-01T00:00:00Z"))["expires_at"].startswith("2999-01-01")


async def test_revoking_a_key_ends_every_key_minted_under_it_and_no_other(api: Api) -> None:
    both = ["session.read", "workspace.read"]
    parent = await minted(api.key, permissions=both)
    sibling = await minted(api.key, permissions=both)
    async with api.stack.client(parent["secret"]) as as_parent:
        child = await minted(as_parent, permissions=both)
        async with api.stack.client(child["secret"]) as as_child:
            grandchild = await minted(as_child)
    async with api.stack.client(sibling["secret"]) as as_sibling:
        nephew = await minted(as_sibling)
    revoked = await api.key.delete(f"/v1/api-keys/{parent['id']}")
    assert revoked.status_code == 200
    for key in (parent, child, grandchild):
        assert not await works(api, key["secret"])
    for key in (sibling, nephew):
        assert await works(api, key["secret"])
    assert (await api.key.get("/v1/sessions")).status_code == 200  # the bootstrap key is a root
    # The listing says so: a key ended by its parent reads as revoked, from the moment the parent was.
    listed = {key["id"]: key for key in await listing(api)}
    when = listed[parent["id"]]["revoked_at"]
    assert when is not None
    assert listed[child["id"]]["revoked_at"] == when
    assert listed[grandchild["id"]]["revoked_at"] == when
    assert listed[nephew["id"]]["revoked_at"] is None
    listed_fields = MINTED_FIELDS - {"secret"} | {"created_by", "last_used_at", "revoked_at"}
    assert all(set(key) == listed_fields for key in listed.values())


async def test_revoking_a_middle_key_ends_those_below_it_not_above(api: Api) -> None:
    both = ["session.read", "workspace.read"]
    parent = await minted(api.key, permissions=both)
    async with api.stack.client(parent["secret"]) as as_parent:
        child = await minted(as_parent, permissions=both)
        async with api.stack.client(child["secret"]) as as_child:
            grandchild = await minted(as_child)
            # A key may revoke itself.
            assert (await as_child.delete(f"/v1/api-keys/{child['id']}")).status_code == 200
    assert await works(api, parent["secret"])
    assert not await works(api, child["secret"])
    assert not await works(api, grandchild["secret"])


async def test_a_key_minted_after_its_parent_was_revoked_never_works(api: Api) -> None:
    both = ["session.read", "workspace.read"]
    parent = await minted(api.key, permissions=both)
    async with api.stack.client(parent["secret"]) as as_parent:
        child = await minted(as_parent, permissions=both)
    # The child mints while its parent is revoked under it: the grandchild is born ended.
    async with api.stack.client(child["secret"]) as as_child:
        assert (await api.key.delete(f"/v1/api-keys/{parent['id']}")).status_code == 200
        assert (await as_child.get("/v1/sessions")).status_code == 401
    assert not await works(api, child["secret"])


async def test_minting_is_bounded_in_depth(api: Api) -> None:
    http = api.stack.client()
    secrets = []
    try:
        for _ in range(MAX_KEY_DEPTH):
            created = await minted(http, permissions=["workspace.read"])
            secrets.append(created["secret"])
            await http.aclose()
            http = api.stack.client(created["secret"])
        refused = await mint(http, permissions=["workspace.read"])
        assert refused.status_code == 403, refused.text
        assert f"this key is {MAX_KEY_DEPTH} mints below a root key" in refused.json()["error"]["message"]
    finally:
        await http.aclose()
    # The deepest key works, and revoking the first key of the chain ends all of it.
    async with api.stack.client(secrets[-1]) as deepest:
        assert (await deepest.get("/v1/api-keys")).status_code == 200
    first = next(key for key in await listing(api) if key["prefix"] == secrets[0][:15])
    assert (await api.key.delete(f"/v1/api-keys/{first['id']}")).status_code == 200
    async with api.stack.client(secrets[-1]) as deepest:
        assert (await deepest.get("/v1/api-keys")).status_code == 401
