"""``/components``: every component instance (adapter, bridge, sink) and its supervisor.

The same view for every kind: state, the reason it is degraded, its last error, restarts,
the counters every kind has (``stats``) and its own (``component_stats``). ``restart``,
``pause`` and ``resume`` ask the supervisor; they return at once, with the state the
request leads to (``stopping`` while it drains, ``paused``, ``starting``), which the
supervisor shows as soon as it is asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import APIRouter, HTTPException, status

from gateway.api.auth import Principal
from gateway.api.deps import Caller, Components, Responses
from gateway.api.schemas import InstanceStatus
from gateway.components import KINDS, Supervisor

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["components"])

_NOT_FOUND: Responses = {404: {"description": "No such component"}}


def _status(supervisor: Supervisor, kind: str, name: str) -> InstanceStatus:
    found = supervisor.status(kind, name) if kind in KINDS else None
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no {kind} {name!r}")
    return InstanceStatus(**found)


@router.get("/components", summary="Every adapter, bridge and sink, and its state")
async def list_components(supervisor: Components) -> list[InstanceStatus]:
    return [InstanceStatus(**found) for found in supervisor.statuses()]


@router.get("/components/{kind}/{name}", summary="One component", responses=_NOT_FOUND)
async def get_component(supervisor: Components, kind: str, name: str) -> InstanceStatus:
    return _status(supervisor, kind, name)


def _operation(
    supervisor: Supervisor, caller: Principal, kind: str, name: str, action: str
) -> InstanceStatus:
    _status(supervisor, kind, name)
    operations: dict[str, Callable[[str, str], bool]] = {
        "restart": supervisor.restart,
        "pause": supervisor.pause,
        "resume": supervisor.resume,
    }
    if not operations[action](kind, name):
        # It exists (above) and the supervisor refuses: it is disabled (no task to ask).
        raise HTTPException(status.HTTP_409_CONFLICT, f"the {kind} {name!r} is disabled")
    log.info("%s %s: %s requested through the API by %s", kind, name, action, caller.name)
    return _status(supervisor, kind, name)


_OPERATION: Responses = {
    **_NOT_FOUND,
    409: {"description": "The component is disabled"},
}


@router.post(
    "/components/{kind}/{name}/restart", summary="Restart a component", responses=_OPERATION
)
async def restart_component(
    supervisor: Components, caller: Caller, kind: str, name: str
) -> InstanceStatus:
    return _operation(supervisor, caller, kind, name, "restart")


@router.post(
    "/components/{kind}/{name}/pause",
    summary="Stop a component until it is resumed",
    responses=_OPERATION,
)
async def pause_component(
    supervisor: Components, caller: Caller, kind: str, name: str
) -> InstanceStatus:
    return _operation(supervisor, caller, kind, name, "pause")


@router.post(
    "/components/{kind}/{name}/resume", summary="Resume a paused component", responses=_OPERATION
)
async def resume_component(
    supervisor: Components, caller: Caller, kind: str, name: str
) -> InstanceStatus:
    return _operation(supervisor, caller, kind, name, "resume")
