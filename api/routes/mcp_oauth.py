"""The addresses an MCP grant's OAuth flow reaches without a credential: the Client ID Metadata Document
an authorization server fetches to learn who Switchboard is as a client."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from mcp.shared.auth import OAuthClientMetadata

from api.state import State
from broker.errors import NotFound
from common.oauth_addresses import CLIENT_METADATA_PATH, callback_url, client_metadata_url

router = APIRouter(tags=["mcp"])

# Authorization servers cache it; its content changes only with the deployment's public URL.
_CACHE = "public, max-age=3600"


@router.get(CLIENT_METADATA_PATH)
async def client_metadata(state: State) -> JSONResponse:
    """Switchboard as an OAuth client: its `client_id` is this document's own URL, its one redirect the
    callback; a public client (PKCE, no secret). 404 while `SWITCHBOARD_PUBLIC_URL` is unset."""
    public_url = state.broker.settings.public_url
    if public_url is None:
        raise NotFound("no client metadata: SWITCHBOARD_PUBLIC_URL is not set")
    metadata = OAuthClientMetadata(
        redirect_uris=[callback_url(public_url)],
        token_endpoint_auth_method="none",  # noqa: S106 (an auth method, no password: PKCE, no secret)
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        client_name="Switchboard",
        client_uri=str(public_url),
        application_type="web",
    )
    body = {"client_id": client_metadata_url(public_url), **metadata.model_dump(mode="json", exclude_none=True)}
    return JSONResponse(body, headers={"Cache-Control": _CACHE})
