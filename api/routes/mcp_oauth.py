"""The addresses an MCP grant's OAuth flow reaches without a credential: the Client ID Metadata Document
an authorization server fetches to learn who Switchboard is as a client."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.schemas.common import ErrorBody
from api.state import State
from broker.errors import NotFound
from common.oauth_addresses import CLIENT_METADATA_PATH, callback_url, client_metadata_url

router = APIRouter(tags=["mcp"])

# Authorization servers cache it; its content changes only with the deployment's public URL.
_CACHE = "public, max-age=3600"


# Served to anyone (an authorization server fetches it): the document states no credential for it.
@router.get(CLIENT_METADATA_PATH, responses={404: {"model": ErrorBody}}, openapi_extra={"security": []})
async def client_metadata(state: State) -> JSONResponse:
    """Switchboard as an OAuth client: its `client_id` is this document's own URL, its one redirect the
    callback; a public client (PKCE, no secret). 404 while `SWITCHBOARD_PUBLIC_URL` is unset."""
    public_url = state.broker.settings.public_url
    if public_url is None:
        raise NotFound("no client metadata: SWITCHBOARD_PUBLIC_URL is not set")
    # Written out rather than built with the `mcp` package's model: the API starts without that package
    # (tests/unit/test_model_import.py); the test holds it to that model.
    body = {
        "client_id": client_metadata_url(public_url),
        "client_name": "Switchboard",
        "client_uri": str(public_url),
        "redirect_uris": [callback_url(public_url)],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
    }
    return JSONResponse(body, headers={"Cache-Control": _CACHE})
