"""The pages and files a browser loads from the API: the SDK (`/sdk/...`), the console and the demo."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from api.deps import Authenticated
from api.state import State
from broker.errors import NotFound

router = APIRouter(tags=["web"])

# Served as they are committed; nothing is built at start.
# switchboard.d.ts: its TypeScript declarations (examples/typed/ is checked against them).
SDK_FILES = ("switchboard.js", "page-tools.js", "input-requests.js", "switchboard.d.ts")
PAGES = {"console": "console.html", "demo": "demo.html", "index": "index.html"}
# The pages' scripts, and what they share; the SDK does not need them.
PAGE_FILES = (
    "console.js",
    "demo.js",
    "transcript.js",
    "inbox.js",
    "input-form.js",
    "sign-ins.js",
    "timeline.js",
    "timeline-view.js",
)
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".ts": "application/typescript; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css",
}


def _static(name: str) -> Response:
    body = resources.files("api").joinpath("static", name).read_bytes()
    kind = _TYPES[name[name.rindex(".") :]]
    # Revalidated on every load, so a new server version reaches open tabs at their next reload.
    return Response(body, media_type=kind, headers={"Cache-Control": "no-cache"})


@router.get("/sdk/{name}", include_in_schema=False)
async def sdk(name: str) -> Response:
    """The browser SDK: `switchboard.js`, the modules it imports (the page tools, input requests), and its
    TypeScript declarations."""
    if name not in SDK_FILES:
        raise NotFound(f"no SDK file {name}; there are {', '.join(SDK_FILES)}")
    return _static(name)


@router.get("/pages/{name}", include_in_schema=False)
async def page_file(name: str) -> Response:
    """The console's and the demo's scripts, and the one they share."""
    if name not in PAGE_FILES:
        raise NotFound(f"no page file {name}; there are {', '.join(PAGE_FILES)}")
    return _static(name)


@router.get("/", include_in_schema=False)
async def landing() -> Response:
    """What a person opening the server's address finds: links to the demo, the console and the docs."""
    return _static(PAGES["index"])


@router.get("/demo", include_in_schema=False)
async def demo() -> Response:
    """A small app (a table and a form) whose tab registers page tools on a scripted session."""
    return _static(PAGES["demo"])


@router.get("/console", include_in_schema=False)
async def console() -> Response:
    """The operators' console: sessions, live transcripts, clients, approvals, input, cancel."""
    return _static(PAGES["console"])


@router.get("/console/config", include_in_schema=False)
async def console_config(principal: Authenticated, state: State) -> JSONResponse:
    """What the console reads of the deployment: the trace UI's address template
    (`SWITCHBOARD_TRACE_URL_TEMPLATE`, or null). A session token gets null: it is a user's credential, and
    where the operators' trace UI lives is not the user's to know."""
    template = state.broker.settings.trace_url_template if principal.kind == "api_key" else None
    return JSONResponse({"trace_url_template": template}, headers={"Cache-Control": "no-store"})
