"""Operational routes outside /v1: liveness, readiness, metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from api.state import State
from broker.services.telemetry import render_figures

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> JSONResponse:
    """The process is alive (it answers)."""
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(state: State) -> JSONResponse:
    """Redis answers, every broker script is loaded and the process is not draining; 503 otherwise."""
    if state.draining:
        return JSONResponse({"status": "draining", "reason": "shutting down; other replicas take the traffic"}, 503)
    if await state.broker.ready():
        instance = state.broker.settings.instance_id
        return JSONResponse({"status": "ready"} | ({"instance": instance} if instance else {}))
    return JSONResponse({"status": "unavailable", "reason": "Redis is unreachable or scripts are missing"}, 503)


@router.get("/metrics", responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
async def metrics(state: State) -> Response:
    """Prometheus metrics of this process."""
    return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")


@router.get(
    "/metrics/cluster", responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}}
)
async def cluster_metrics(state: State) -> Response:
    """The deployment's figures (calls, clients, runs, queue depth), the same from every replica: scrape
    it through one address. While a Cluster node is down it still answers, without that node's
    partitions (`switchboard_cluster_partitions_unread`) and without the counters."""
    figures = await state.broker.figures()
    return Response(render_figures(figures), media_type="text/plain; version=0.0.4")
