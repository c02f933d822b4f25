"""Serving the API with uvicorn (`switchboard api`)."""

from __future__ import annotations

import uvicorn

from api.app import create_app
from broker import Settings

# Long-lived event streams would hold shutdown open; after this they are closed and clients reconnect.
GRACEFUL_SHUTDOWN_S = 5


def serve(settings: Settings, redis_url: str) -> None:
    config = uvicorn.Config(
        create_app(settings, redis_url),
        host=settings.host,
        port=settings.port,
        log_level="info",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        proxy_headers=True,
    )
    uvicorn.Server(config).run()
