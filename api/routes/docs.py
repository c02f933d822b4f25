"""/docs (Swagger UI) and /redoc without another host: their files come from the `fastapi-offline`
package and are served by the API, so the docs work on a machine with no internet."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

from broker.errors import NotFound

router = APIRouter(include_in_schema=False)

ASSETS = "/docs-assets"
_TYPES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
TITLE = "Switchboard API"


# ReDoc's side menu always shows Redocly's logo, fetched from their CDN: it is shown from here instead.
_REDOCLY_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


@cache
def _asset(name: str) -> bytes:
    body = resources.files("fastapi_offline").joinpath("static", name).read_bytes()
    return body.replace(_REDOCLY_LOGO, f"{ASSETS}/favicon.png".encode())


@router.get(f"{ASSETS}/{{name}}")
async def asset(name: str) -> Response:
    if name not in _TYPES:
        raise NotFound(f"no docs asset {name}")
    return Response(_asset(name), media_type=_TYPES[name], headers={"Cache-Control": "public, max-age=86400"})


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title=TITLE,
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon.png",
        # A key given to Authorize stays across reloads of the page.
        swagger_ui_parameters={"persistAuthorization": True},
    )


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title=TITLE,
        redoc_js_url=f"{ASSETS}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS}/favicon.png",
        with_google_fonts=False,
    )
