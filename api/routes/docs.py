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


# A bar above each page with the way back to the server's landing page (`/`) and its other pages; inline,
# so the docs still load nothing from anywhere else.
_NAV = (
    "<style>body { margin: 0 }</style>"
    '<nav id="switchboard-nav" style="font: 14px/1.4 system-ui, sans-serif; padding: 8px 20px; display: flex;'
    " flex-wrap: wrap; gap: 4px 16px; border-bottom: 1px solid #d0d5dd; background: #f4f6fb; position: relative;"
    ' z-index: 10">'
    '<a href="/" style="color: #1d2330; font-weight: 600; text-decoration: none">&larr; Switchboard</a>'
    "{links}</nav>"
)
_LINK = '<a href="{href}" style="color: #2952cc">{text}</a>'


def _with_nav(page: HTMLResponse, *links: tuple[str, str]) -> HTMLResponse:
    nav = _NAV.replace("{links}", "".join(_LINK.format(href=href, text=text) for href, text in links))
    return HTMLResponse(bytes(page.body).replace(b"<body>", b"<body>\n" + nav.encode(), 1))


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    page = get_swagger_ui_html(
        openapi_url="/openapi.json",
        title=TITLE,
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon.png",
        # A key given to Authorize stays across reloads of the page.
        swagger_ui_parameters={"persistAuthorization": True},
    )
    return _with_nav(page, ("/demo", "Demo"), ("/console", "Console"), ("/redoc", "This API in ReDoc"))


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    page = get_redoc_html(
        openapi_url="/openapi.json",
        title=TITLE,
        redoc_js_url=f"{ASSETS}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS}/favicon.png",
        with_google_fonts=False,
    )
    return _with_nav(page, ("/demo", "Demo"), ("/console", "Console"), ("/docs", "This API in Swagger UI"))
