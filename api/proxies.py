"""The client behind a proxy the deployment trusts (`SWITCHBOARD_TRUSTED_PROXIES`).

A request whose peer is one of the trusted proxies takes its client address from `X-Forwarded-For` (the
right-most address that is not itself a trusted proxy: each proxy appends the address it was reached
from, so everything left of that is whatever the client chose to send) and its scheme from
`X-Forwarded-Proto`. From any other peer both headers are ignored. The address is what the failed-auth
brake counts by (`api.rate_limit`) and the scheme is half of the same-origin check (`api.cors`), so
believing either from anyone would let a client pick its own.

This is done here, in the application, and never by the server: `switchboard api`, `switchboard up`
and the tests' in-process server run uvicorn with its own proxy handling off (`api.server.
uvicorn_options`), so every way of serving the app believes the same proxies. The parsing is uvicorn's
public `ProxyHeadersMiddleware`.
"""

from __future__ import annotations

from typing import Any, cast

from starlette.types import ASGIApp
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware


def behind_proxies(app: ASGIApp, trusted: list[str]) -> ASGIApp:
    """`app`, seeing the forwarded client and scheme of requests that come through `trusted` proxies."""
    if not trusted:
        return app
    return cast(ASGIApp, ProxyHeadersMiddleware(cast(Any, app), trusted_hosts=trusted))
