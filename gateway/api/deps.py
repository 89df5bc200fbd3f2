"""FastAPI dependencies shared by the routers: the gateway, the caller, paging.

Every endpoint and dependency of the API is ``async def``: FastAPI runs plain functions
in a thread pool, and broker state must only be touched on the broker's loop.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from fastapi import Depends, HTTPException, Query, Request, status
from fastapi.exceptions import RequestValidationError

from gateway.api.auth import Principal, authenticate
from gateway.api.components import GatewayView
from gateway.components import Supervisor

__all__ = [
    "MAX_QUERY",
    "Caller",
    "Components",
    "Gw",
    "Limit",
    "Offset",
    "Responses",
    "page",
    "unique_keys",
]


T = TypeVar("T")

#: Longest string a query parameter (a filter) may be.
MAX_QUERY = 1024

#: The ``responses=`` of a route: status code -> OpenAPI response object.
Responses = dict[int | str, dict[str, Any]]


async def _gateway(request: Request) -> GatewayView:
    gateway: GatewayView = request.app.state.gateway
    return gateway


async def _components(request: Request) -> Supervisor:
    supervisor = getattr(request.app.state.gateway, "components", None)
    if not isinstance(supervisor, Supervisor):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "this gateway runs no components")
    return supervisor


Gw = Annotated[GatewayView, Depends(_gateway)]
#: The gateway's component supervisor: how a component's own routes reach its instances
#: (``supervisor.instance(kind, name)``).
Components = Annotated[Supervisor, Depends(_components)]
Caller = Annotated[Principal, Depends(authenticate)]
Offset = Annotated[int, Query(ge=0, le=1_000_000_000, description="Items to skip.")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Items per page.")]


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key)
        found[key] = value
    return found


async def unique_keys(request: Request) -> None:
    """A JSON body whose objects name a key twice is a 422, not the last value (JSON
    leaves it undefined; Python's parser keeps the last one). Runs after
    ``authenticate``, on the body FastAPI has read and parsed."""
    if "json" not in request.headers.get("content-type", ""):
        return
    body = await request.body()
    if not body:
        return
    try:
        json.loads(body, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        key = exc.args[0]
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body",),
                    "msg": f"JSON decode error: the key {key!r} appears twice in an object",
                    "input": key,
                }
            ]
        ) from None
    except ValueError:  # not JSON: FastAPI has answered it already
        return


def page(items: list[T], offset: int, limit: int) -> list[T]:
    return items[offset : offset + limit]
