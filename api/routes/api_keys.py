"""POST, GET /v1/api-keys and DELETE /v1/api-keys/{id}."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api import render
from api.deps import Authenticated, Page, canonical_id
from api.keyed import Answer, Keyed, keyed
from api.schemas.common import ErrorBody
from api.schemas.keys import ApiKeyBody, ApiKeyPage, ApiKeyReceiptBody, MintApiKeyBody, MintedApiKeyBody
from api.state import State
from broker.errors import Forbidden, InvalidRequest
from broker.services.credentials import MAX_KEY_DEPTH, Permission
from common.codec import rfc3339, to_ms

router = APIRouter(prefix="/v1/api-keys", tags=["api-keys"], responses={400: {"model": ErrorBody}})


@router.post(
    "",
    status_code=201,
    responses={201: {"model": MintedApiKeyBody}, 200: {"model": ApiKeyReceiptBody, "description": "A replay"}},
)
async def mint_api_key(body: MintApiKeyBody, request: Request, caller: Authenticated, state: State) -> Response:
    """Mint a key holding at most the permissions of the key that mints it, and expiring no later than it
    (`expires_at` left out: when the minting key expires); the secret is shown once. Revoking the
    minting key, or any key above it, ends this one too."""
    if caller.kind == "session_token":
        caller.require(Permission.WORKSPACE_READ)
    missing = sorted(set(body.permissions) - caller.permissions)
    if missing:
        raise Forbidden(f"a key mints keys only with permissions it holds; this one lacks {', '.join(missing)}")
    if len(caller.ancestors) >= MAX_KEY_DEPTH:
        raise Forbidden(
            f"this key is {MAX_KEY_DEPTH} mints below a root key, the deepest a key may mint; "
            "mint with a key nearer the root"
        )
    expires_at = _expiry(body, caller.expires_at)

    async def act(_: Keyed) -> Answer:
        record, secret = await state.broker.credentials.mint_api_key(
            body.label, list(body.permissions), expires_at, ancestors=(caller.id, *caller.ancestors)
        )
        receipt = render.api_key_receipt(record)
        minted = MintedApiKeyBody.model_validate({**receipt.model_dump(), "secret": secret})
        return Answer(201, minted.model_dump_json().encode(), 200, receipt.model_dump_json().encode())

    return await keyed(request, caller, act, seed={})


def _expiry(body: MintApiKeyBody, parent: int | None) -> int | None:
    """The minted key's expiry (ms): as asked, at most the minting key's; left out, the minting key's.
    A time already past is accepted (the document cannot say "in the future", and a client's clock may
    run ahead of ours): the key is minted expired."""
    if "expires_at" not in body.model_fields_set:
        return parent
    asked = to_ms(body.expires_at) if body.expires_at else None
    if parent is not None and (asked is None or asked > parent):
        wanted = "never" if asked is None else rfc3339(asked)
        raise InvalidRequest(
            f"expires_at: a key expires no later than the key that mints it, which expires at {rfc3339(parent)}; "
            f"{wanted} is later (ask for that time or earlier, or leave expires_at out to take it)"
        )
    return asked


@router.get("", response_model=ApiKeyPage)
async def list_api_keys(caller: Authenticated, state: State, page: Page) -> ApiKeyPage:
    caller.require(Permission.WORKSPACE_READ)
    keys, cursor = await state.broker.credentials.list_api_keys(
        limit=page.limit, after=page.after, ascending=page.ascending
    )
    return ApiKeyPage.model_validate({"items": [render.api_key(k) for k in keys], "next_cursor": cursor})


@router.delete("/{api_key_id}", response_model=ApiKeyBody)
async def revoke_api_key(api_key_id: str, caller: Authenticated, state: State) -> ApiKeyBody:
    """Revoke a key: a key may revoke itself, or one whose permissions it holds all of."""
    key_id = canonical_id(api_key_id, "API key")
    if caller.kind == "session_token":
        caller.require(Permission.WORKSPACE_READ)
    target = await state.broker.credentials.get_api_key(key_id)
    lacking = sorted(set(target.permissions) - caller.permissions)
    if key_id != caller.id and lacking:
        raise Forbidden(f"revoking this key needs every permission it holds; this key lacks {', '.join(lacking)}")
    return render.api_key(await state.broker.credentials.revoke_api_key(key_id))
