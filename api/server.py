"""Serving the API with uvicorn (`switchboard api`)."""

from __future__ import annotations

import asyncio
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from api.app import create_app
from api.connection import connection_protocol
from api.settings import ApiSettings

# In-flight requests get this long to finish once the drain is over and uvicorn stops listening.
GRACEFUL_SHUTDOWN_S = 10


class _Server(uvicorn.Server):
    """uvicorn, drained before it stops: on SIGTERM the app first fails readiness and closes each
    connection after its response for `drain_grace_s` while still serving, so balancers and keep-alive
    clients move to other replicas; then the open event streams end (with a `retry:` hint, to resume on
    another replica with Last-Event-ID) and uvicorn's own shutdown stops listening and lets in-flight
    requests finish. A second signal stops at once."""

    def __init__(self, config: uvicorn.Config, app: FastAPI, grace_s: float) -> None:
        super().__init__(config)
        self._app = app
        self._grace_s = grace_s

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        state = getattr(self._app.state, "switchboard", None)
        if state is None or state.draining or self._grace_s == 0:
            self._stop(sig, frame)
            return
        state.draining = True
        loop = asyncio.get_event_loop()
        loop.call_soon_threadsafe(loop.call_later, self._grace_s, self._stop, sig, frame)

    def _stop(self, sig: int, frame: FrameType | None) -> None:
        state = getattr(self._app.state, "switchboard", None)
        if state is not None:
            asyncio.get_event_loop().call_soon_threadsafe(state.hub.close_streams)
        super().handle_exit(sig, frame)


def uvicorn_options(settings: ApiSettings) -> dict[str, Any]:
    """What every uvicorn serving the app is given, in a process of its own or inside the tests: its
    connections' protocol (the header deadline and the hub's writes, `api.connection`), and no proxy
    handling of uvicorn's own (it would believe 127.0.0.1 by default; the app believes the proxies
    `SWITCHBOARD_TRUSTED_PROXIES` names, `api.proxies`)."""
    return {"http": connection_protocol(settings.header_timeout_s), "proxy_headers": False}


def serve(settings: ApiSettings, redis_url: str) -> None:
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
        **uvicorn_options(settings),
    )
    _Server(config, app, settings.drain_grace_s).run()
