"""Model providers: the platform ones and the workspace's own (BYOK), whose keys never come back out."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api import render
from api.deps import Authenticated, Include, Page, canonical_id, extensions_asked
from api.keyed import Answer, Keyed, keyed
from api.schemas.common import ErrorBody
from api.schemas.providers import (
    ByokProviderBody,
    CreateProviderBody,
    PlatformProviderBody,
    ProviderBody,
    ProviderPage,
    UpdateProviderBody,
)
from api.state import State
from broker.services.credentials import Permission
from common.codec import uuid7

router = APIRouter(prefix="/v1/model-providers", tags=["model-providers"], responses={400: {"model": ErrorBody}})


@router.get("", response_model=ProviderPage)
async def list_providers(caller: Authenticated, state: State, page: Page, include: Include = None) -> ProviderPage:
    """Providers of the formats Switchboard adds (openai_chat, gemini) are listed only with
    `?include=extensions`: the Subako SDK refuses a whole page holding a format it does not know."""
    caller.require(Permission.MODEL_PROVIDER_READ)
    providers, cursor = await state.broker.providers.page(
        limit=page.limit, after=page.after, ascending=page.ascending, extensions=extensions_asked(include)
    )
    items = [render.provider(p, state.broker.workspace_id) for p in providers]
    return ProviderPage.model_validate({"items": items, "next_cursor": cursor})


@router.post("", status_code=201, response_model=ProviderBody)
async def create_provider(body: CreateProviderBody, request: Request, caller: Authenticated, state: State) -> Response:
    """A workspace provider; its key is write-only. A `base_url` whose host resolves to a loopback,
    private, link-local or metadata address is refused (400) unless the deployment sets
    SWITCHBOARD_PROVIDER_ALLOW_PRIVATE; every connection checks the address again. A `cloud` (an
    extension: Bedrock, Vertex, Azure) takes its write-only `credentials` (docs/providers/clouds.md)."""
    caller.require(Permission.MODEL_PROVIDER_MANAGE)

    async def act(keyed_: Keyed) -> Answer:
        record = await state.broker.providers.create(
            keyed_.seed["provider_id"],
            format=body.format,
            display_name=body.display_name,
            description=body.description,
            base_url=body.base_url,
            api_key=body.api_key,
            text_only=body.text_only,
            cloud=body.cloud.model_dump() if body.cloud is not None else None,
            credentials=body.credentials,
        )
        return Answer(201, render.provider(record, state.broker.workspace_id).model_dump_json().encode())

    return await keyed(request, caller, act, seed={"provider_id": uuid7()})


@router.get("/{provider_id}", response_model=ProviderBody)
async def get_provider(
    provider_id: str, caller: Authenticated, state: State
) -> PlatformProviderBody | ByokProviderBody:
    caller.require(Permission.MODEL_PROVIDER_READ)
    record = await state.broker.providers.get(canonical_id(provider_id, "model provider"))
    return render.provider(record, state.broker.workspace_id)


@router.patch("/{provider_id}", response_model=ProviderBody)
async def update_provider(
    provider_id: str, body: UpdateProviderBody, caller: Authenticated, state: State
) -> PlatformProviderBody | ByokProviderBody:
    """Change what is given; an absent or null field stays as it was. A new `base_url` needs `api_key`
    with it (400 otherwise), and a cloud provider's new `credentials` too: a stored key is never sent to
    an address it was not stored for. Addresses that resolve to loopback, private, link-local or metadata
    addresses are refused (400) unless the deployment sets SWITCHBOARD_PROVIDER_ALLOW_PRIVATE."""
    caller.require(Permission.MODEL_PROVIDER_MANAGE)
    fields = body.model_dump(exclude_none=True, exclude={"credentials", "cloud"})
    changes = {k: v for k, v in fields.items() if isinstance(v, str)}
    if body.text_only is not None:
        changes["text_only"] = "1" if body.text_only else ""
    record = await state.broker.providers.update(
        canonical_id(provider_id, "model provider"),
        changes,
        cloud=body.cloud.model_dump() if body.cloud is not None else None,
        credentials=body.credentials,
    )
    return render.provider(record, state.broker.workspace_id)


@router.delete("/{provider_id}", status_code=204)
async def delete_provider(provider_id: str, caller: Authenticated, state: State) -> Response:
    caller.require(Permission.MODEL_PROVIDER_MANAGE)
    await state.broker.providers.delete(canonical_id(provider_id, "model provider"))
    return Response(status_code=204)
