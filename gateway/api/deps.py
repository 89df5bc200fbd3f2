"""FastAPI dependencies shared by the routers: the gateway, the caller, paging.

Every endpoint and dependency of the API is ``async def``: FastAPI runs plain functions
in a thread pool, and broker state must only be touched on the broker's loop.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request

from gateway.api.auth import Principal, authenticate
from gateway.api.components import GatewayView
from gateway.api.metrics import ApiStats

__all__ = ["MAX_QUERY", "Caller", "Gw", "Limit", "Offset", "Responses", "Stats", "page"]


T = TypeVar("T")

#: Longest string a query parameter (a filter) may be.
MAX_QUERY = 1024

#: The ``responses=`` of a route: status code -> OpenAPI response object.
Responses = dict[int | str, dict[str, Any]]


async def _gateway(request: Request) -> GatewayView:
    gateway: GatewayView = request.app.state.gateway
    return gateway


async def _stats(request: Request) -> ApiStats:
    stats: ApiStats = request.app.state.stats
    return stats


Gw = Annotated[GatewayView, Depends(_gateway)]
Stats = Annotated[ApiStats, Depends(_stats)]
Caller = Annotated[Principal, Depends(authenticate)]
Offset = Annotated[int, Query(ge=0, le=1_000_000_000, description="Items to skip.")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Items per page.")]


def page(items: list[T], offset: int, limit: int) -> list[T]:
    return items[offset : offset + limit]
