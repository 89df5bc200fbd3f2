"""``/health`` and ``/brokers``: is it up, and what is it."""

from __future__ import annotations

from fastapi import APIRouter

from broker_core.broker import VERSION
from broker_core.clock import now as clock_now
from broker_core.clock import to_wall
from gateway.api.deps import Gw
from gateway.api.schemas import BrokerInfo, HealthStatus, ListenerInfo
from gateway.config import BindAddress

__all__ = ["router"]

router = APIRouter(tags=["broker"])


@router.get("/health", summary="Liveness of the broker")
async def health(gateway: Gw) -> HealthStatus:
    broker = gateway.broker
    return HealthStatus(
        status="ok", node=broker.node_name, uptime_s=round(clock_now() - broker.started_at, 3)
    )


@router.get("/brokers", summary="This node: version, uptime, listeners")
async def brokers(gateway: Gw) -> list[BrokerInfo]:
    broker = gateway.broker
    listeners = [
        ListenerInfo(name=name, address=str(BindAddress(host, port)))
        for name, (host, port) in gateway.addresses.items()
    ]
    return [
        BrokerInfo(
            node=broker.node_name,
            version=VERSION,
            uptime_s=int(clock_now() - broker.started_at),
            started_at=to_wall(broker.started_at),  # the broker's clock, shown on the wall clock
            listeners=listeners,
        )
    ]
