"""What the app holds for its lifetime (built in the lifespan, read by dependencies)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from api.metrics import Metrics
from broker import Broker
from broker.live import LiveHub


@dataclass
class AppState:
    broker: Broker
    hub: LiveHub
    metrics: Metrics


def state_of(request: Request) -> AppState:
    state: AppState = request.app.state.switchboard
    return state


def broker_of(request: Request) -> Broker:
    return state_of(request).broker


State = Annotated[AppState, Depends(state_of)]
