"""What the app holds for its lifetime (built in the lifespan, read by dependencies)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from api.mcp.sealing import RequestStates
from api.metrics import Metrics
from api.settings import ApiSettings
from api.stream_caps import StreamCaps
from broker import Broker
from broker.run_spans import RunSpans
from broker.services.live import LiveHub
from broker.services.token_cipher import TokenCipher
from common.tracing import Tracing


@dataclass
class AppState:
    broker: Broker[ApiSettings]
    hub: LiveHub
    metrics: Metrics
    stream_caps: StreamCaps
    # Seals the `requestState` an MCP caller asked for input echoes back (api/mcp/inputs.py).
    request_states: RequestStates
    # The process's spans' way out (off: nothing is made).
    tracing: Tracing = field(default_factory=Tracing)
    # Opens and seals MCP grants' OAuth tokens and sign-in flows; None without SWITCHBOARD_SECRET_KEY.
    token_cipher: TokenCipher | None = None

    # Set by SIGTERM (api.server): readiness fails and every response closes its connection, so balancers
    # and clients move to other replicas before this one stops listening.
    draining: bool = False

    @property
    def run_spans(self) -> RunSpans:
        """Makes a run's spans where this process ends it (a cancel of a run that waited)."""
        return RunSpans(self.tracing, self.broker)


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.switchboard
    return state


# Async on purpose: FastAPI runs a sync dependency in its thread pool, a hop per request.
async def state_of(request: Request) -> AppState:
    return app_state(request)


def broker_of(request: Request) -> Broker[ApiSettings]:
    return app_state(request).broker


State = Annotated[AppState, Depends(state_of)]
