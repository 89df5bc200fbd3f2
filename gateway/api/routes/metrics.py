"""``/api/v1/metrics`` (JSON) and ``/metrics`` (Prometheus text format)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder
from prometheus_client.registry import CollectorRegistry

from gateway.api.deps import Gw
from gateway.api.metrics import snapshot
from gateway.api.schemas import Metrics

__all__ = ["prometheus_router", "router"]

router = APIRouter(tags=["metrics"])
prometheus_router = APIRouter(tags=["metrics"])


@router.get("/metrics", summary="Broker metrics as JSON")
async def metrics_json(gateway: Gw) -> Metrics:
    return snapshot(gateway)


@prometheus_router.get(
    "/metrics",
    summary="Metrics in Prometheus text format (OpenMetrics when asked for)",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_PLAIN_0_0_4: {}}}},
)
async def metrics_prometheus(request: Request) -> Response:
    registry: CollectorRegistry = request.app.state.registry
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encoder(registry), headers={"Content-Type": content_type})
