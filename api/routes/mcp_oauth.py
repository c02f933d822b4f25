"""The addresses an MCP grant's OAuth flow reaches without a credential: the Client ID Metadata Document
an authorization server fetches to learn who Switchboard is as a client, and the callback the person's
browser comes back to (the state it carries is the credential)."""

from __future__ import annotations

import html

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse

from api.schemas.common import ErrorBody
from api.state import State
from broker.errors import NotFound
from common.oauth_addresses import CALLBACK_PATH, CLIENT_METADATA_PATH, callback_url, client_metadata_url
from common.runtime import imported

router = APIRouter(tags=["mcp"])

# The callback's parameters and how long each may be (RFC 6749 4.1.2, RFC 9207): past these, or repeated,
# a request is refused before the state is looked at.
_PARAMETERS = {"state": 512, "code": 4096, "iss": 2048, "error": 256, "error_description": 1024}

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


# The authorization server's redirect carries no credential of ours: the state, drawn at random, bound to its
# session, working once and expiring, is what it proves.
@router.get(
    CALLBACK_PATH,
    response_class=HTMLResponse,
    responses={400: {"content": {"text/html": {}}, "description": "The sign-in did not complete: why."}},
    openapi_extra={"security": []},
)
async def oauth_callback(request: Request, state: State) -> HTMLResponse:
    """Where an MCP grant's authorization server sends the person's browser back (`code`, `state`, `iss`, or
    `error`): the code is exchanged for tokens, kept for the session's subject (else the session), and the
    session gets `mcp_authorization_completed`. A page says the tab can be closed; a bad, used, expired or
    unknown state, an error from the authorization server or a failed exchange: 400, a page saying why,
    nothing kept."""
    found: dict[str, str] = {}
    for name, limit in _PARAMETERS.items():
        values = request.query_params.getlist(name)
        if len(values) > 1:
            return _page(400, "Sign-in failed", f"{name}: given more than once")
        if values and len(values[0]) > limit:
            return _page(400, "Sign-in failed", f"{name}: at most {limit} characters")
        if values:
            found[name] = values[0]
    if not found.get("state"):
        return _page(400, "Sign-in failed", "state: missing; open the sign-in link the agent gave again")
    callback = await imported("api.oauth_callback")
    try:
        done = await callback.complete(
            state.broker,
            state.token_cipher,
            state=found["state"],
            code=found.get("code"),
            iss=found.get("iss"),
            error=found.get("error"),
            error_description=found.get("error_description"),
        )
    except callback.SignInRefused as refused:
        return _page(400, "Sign-in failed", str(refused))
    return _page(200, "Signed in", f"You are signed in to {done.server_url} for {done.grant}. You can close this tab.")


def _page(status: int, title: str, text: str) -> HTMLResponse:
    body = (
        "<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport content='width=device-width'>"
        f"<title>{html.escape(title)}</title><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></html>"
    )
    # No referrer: the page's address holds the code and the state.
    headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
    return HTMLResponse(body, status_code=status, headers=headers)
