"""The FastAPI application: built by `create_app`, opened and closed by its lifespan."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import errors, fastlane, openapi_doc
from api.body_limit import Limit, limited
from api.cors import CrossOrigin
from api.mcp.sealing import RequestStates
from api.metrics import Metrics
from api.proxies import behind_proxies
from api.rate_limit import RateLimits
from api.room import refused_for_room
from api.routes import (
    ag_ui,
    agents,
    ai_sdk,
    api_keys,
    approvals,
    calls,
    clients,
    docs,
    events,
    health,
    inbox,
    inputs,
    mcp,
    mcp_authorizations,
    mcp_connections,
    mcp_oauth,
    providers,
    schedules,
    sessions,
    web,
    webhooks,
)
from api.routes.mcp import SessionMcpLoader
from api.schemas.common import ErrorBody
from api.settings import ApiSettings
from api.sse import DIRECT_SEND
from api.state import AppState
from api.stream_caps import StreamCaps
from api.tracing import TracedRequests
from broker import Broker
from broker.services.telemetry import probe_redis
from broker.services.token_cipher import TokenCipher
from common.addresses import Resolver
from common.jsonlog import pop_ids, push_ids
from common.runtime import settle_heap
from common.tasks import cancel_and_wait
from common.tracing import Tracing, TracingSettings

BOOTSTRAP_LABEL = "bootstrap"


class _CountRequests:
    """Counts requests by route template and status (pure ASGI, so streaming passes straight through)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        status = 500

        async def observe(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, observe)
        finally:
            route: Any = scope.get("route")
            template = getattr(route, "path", "unmatched")
            self._metrics.request(scope["method"], template, status).inc()


def _closing(send: Send) -> Send:
    """`send`, with `Connection: close` on the response head (uvicorn then closes the connection after it)."""

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
        await send(message)

    return closing


_ID_AFTER = {"sessions": "session_id", "clients": "client_id", "calls": "call_id"}


def path_ids(path: str) -> dict[str, str | None]:
    """The session, client and call ids a request's path names, for its log lines."""
    parts = path.split("/")
    ids: dict[str, str | None] = {}
    for segment, value in itertools.pairwise(parts):
        name = _ID_AFTER.get(segment)
        if name is not None and value not in ("", "stream"):
            ids.setdefault(name, value)
    return ids


class SwitchboardApp(FastAPI):
    """FastAPI, with the hot routes taken by the fast lane (`api.fastlane`) before its own stack."""

    def __init__(self, *, settings: ApiSettings, tracing: Tracing, **options: Any) -> None:
        # /docs and /redoc are served from the package's own files (api/routes/docs.py), not a CDN.
        super().__init__(docs_url=None, redoc_url=None, **options)
        self.fast_lane = settings.fast_lane
        self._body_limit = Limit(settings.max_body_bytes, "SWITCHBOARD_MAX_BODY_BYTES")
        self._result_limit = Limit(settings.max_result_body_bytes, "SWITCHBOARD_MAX_RESULT_BODY_BYTES")
        self._rate_limits = RateLimits(settings)
        self._cross_origin = CrossOrigin()
        front = behind_proxies(self._serve, settings.trusted_proxy_list)
        # Untraced, nothing wraps the front: not even a check per request.
        self._front = TracedRequests(front, tracing) if tracing.enabled else front

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: AppState | None = getattr(self.state, "switchboard", None)
        if scope["type"] != "http" or state is None:
            await super().__call__(scope, receive, send)
            return
        await self._front(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: AppState = self.state.switchboard
        path: str = scope["path"]
        if scope["method"] == "GET" and path.endswith("/events/stream"):
            # The server's own send: frames skip every wrapper, the CORS one and `_closing` included (they
            # only change the response head, which goes the ordinary way).
            scope[DIRECT_SEND] = send
        if state.draining:
            send = _closing(send)
        # The ids are parsed out of the path only if something logs.
        token = push_ids(lambda: path_ids(path))
        try:
            await self._cross_origin(state, scope, receive, send, self._route)
        finally:
            pop_ids(token)

    def openapi(self) -> dict[str, Any]:
        """The document, completed with what FastAPI cannot say by itself (`api.openapi_doc`)."""
        if self.openapi_schema is None:
            self.openapi_schema = openapi_doc.complete(super().openapi())
        return self.openapi_schema

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._rate_limits(scope, receive, send, self._bounded)

    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A call's result may carry images, so it has a limit of its own.
        result = scope["method"] == "POST" and scope["path"].endswith("/result")
        await limited(self._result_limit if result else self._body_limit, scope, receive, send, self._dispatch)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: AppState = self.state.switchboard
        if await refused_for_room(state, scope, receive, send):
            return
        if self.fast_lane and scope["method"] == "POST":
            match = fastlane.HOT_PATH.fullmatch(scope["path"])
            if match is not None:
                await fastlane.serve(state, match, scope, receive, send, super().__call__)
                return
        await super().__call__(scope, receive, send)


# Every /v1 route may answer these, in the error envelope (the OpenAPI document says so, and schemathesis
# holds the routes to it).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (401, "No valid credential"),
        (403, "The credential may not do this (a permission, another workspace, or a refused origin)"),
        (404, "No such resource, or not one this credential can see"),
        (409, "Conflicts with the resource's state, or an Idempotency-Key reused with another body"),
        (413, "The request body is over SWITCHBOARD_MAX_BODY_BYTES"),
        (429, "Over a rate limit; retry after Retry-After seconds"),
        (500, "An unexpected error"),
        (
            503,
            "The Redis node holding this request's data is unreachable (down or failing over); retry after Retry-After",
        ),
    )
}


def create_app(
    settings: ApiSettings,
    redis_url: str,
    *,
    settle: bool = False,
    resolver: Resolver | None = None,
    tracing: Tracing | None = None,
) -> FastAPI:
    """The API over the Redis at `redis_url`; one broker connection and one live hub per app. `settle`
    (a server process of its own, not an app inside tests) tunes the collector once started; `resolver`
    answers for provider host names (the system's when None); `tracing`: where spans go (when None, as
    the environment says: docs/observability.md)."""
    metrics = Metrics()
    own_tracing = tracing is None
    tracing = tracing or Tracing.start(TracingSettings(), "switchboard-api")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        broker = await Broker.connect(settings, redis_url, role="switchboard-api", resolver=resolver)
        hub = broker.live_hub(keepalive_s=settings.stream_keepalive_s)
        probe: asyncio.Task[None] | None = None
        try:
            if settings.bootstrap_api_key is not None:
                await broker.credentials.ensure_api_key(settings.bootstrap_api_key.get_secret_value(), BOOTSTRAP_LABEL)
            await hub.start()
            caps = StreamCaps(settings.max_streams_per_session, settings.max_streams_per_credential)
            cipher = None if settings.secret_key is None else TokenCipher(settings.secret_key)
            states = RequestStates(settings.secret_key)
            app.state.switchboard = AppState(broker, hub, metrics, caps, states, tracing, token_cipher=cipher)
            probe = asyncio.create_task(probe_redis(broker.round_trip, metrics.redis_rtt, settings.redis_probe_s))
            if settle:
                settle_heap()
            app.state.switchboard_mcp = session_mcp = SessionMcpLoader(settings.max_body_bytes)
            try:
                yield
            finally:
                await session_mcp.close()
        finally:
            if probe is not None:
                # Not a bare cancel: one landing while the probe's PING is in flight can be lost (3.11's
                # wait_for, inside redis-py), and the API then hung at "Waiting for application shutdown".
                await cancel_and_wait([probe])
            await hub.stop()
            await broker.close()
            if own_tracing:
                # What is left of the spans goes out (or is given up at the exporter's timeout), off the loop.
                await asyncio.to_thread(tracing.shutdown)

    app = SwitchboardApp(
        settings=settings,
        tracing=tracing,
        title="Switchboard",
        version="0.1.0",
        description="Routes an agent's client tool calls to the apps that serve them (the Subako /v1 API).",
        lifespan=lifespan,
    )
    errors.install(app)
    for module in (
        api_keys,
        agents,
        providers,
        sessions,
        events,
        schedules,
        clients,
        approvals,
        calls,
        inputs,
        inbox,
        ag_ui,
        ai_sdk,
        webhooks,
        mcp_connections,
        mcp_authorizations,
    ):
        app.include_router(module.router, responses=ERROR_RESPONSES)
    for module in (health, web, docs, mcp, mcp_oauth):
        app.include_router(module.router)
    app.add_middleware(_CountRequests, metrics=metrics)
    return app
