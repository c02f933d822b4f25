"""Serving the API with uvicorn (`switchboard api`)."""

from __future__ import annotations

import asyncio
from types import FrameType

import uvicorn
from fastapi import FastAPI

from api.app import create_app
from broker import Settings

# In-flight requests get this long to finish after SIGTERM; event streams are ended at once.
GRACEFUL_SHUTDOWN_S = 10


class _Server(uvicorn.Server):
    """uvicorn, but SIGTERM first ends the open event streams: clients resume on another replica with
    Last-Event-ID instead of holding this one's shutdown open until it gives up on them."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self._app = app

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        state = getattr(self._app.state, "switchboard", None)
        if state is not None:
            asyncio.get_event_loop().call_soon_threadsafe(state.hub.close_streams)
        super().handle_exit(sig, frame)


def serve(settings: Settings, redis_url: str) -> None:
    app = create_app(settings, redis_url, settle=True)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="info",
        # uvicorn's own loggers go through the root's handler (broker.jsonlog), JSON like the rest.
        log_config=None,
        access_log=settings.access_log,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        proxy_headers=True,
    )
    _Server(config, app).run()
