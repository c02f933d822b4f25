"""The API's request path stays on the event loop: no dependency or endpoint runs in the thread pool."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from api.routes import agents, api_keys, approvals, clients, events, health, providers, sessions


def calls(dependant: Dependant) -> Iterator[object]:
    if dependant.call is not None:
        yield dependant.call
    for child in dependant.dependencies:
        yield from calls(child)


def test_every_dependency_and_endpoint_is_a_coroutine_function() -> None:
    # FastAPI hands a plain `def` to its thread pool: a hop per request that halved hot-route throughput.
    modules = (api_keys, agents, providers, sessions, events, clients, approvals, health)
    routes = [route for module in modules for route in module.router.routes if isinstance(route, APIRoute)]
    assert routes
    blocking = {
        f"{route.path} -> {getattr(call, '__qualname__', call)}"
        for route in routes
        for call in calls(route.dependant)
        if not inspect.iscoroutinefunction(call) and not inspect.isasyncgenfunction(call)
    }
    assert not blocking
