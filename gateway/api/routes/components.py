"""``/adapters``, ``/bridges``, ``/rules``: the parts around the broker (see components)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException, status

from gateway.api.components import (
    Supervisor,
    adapter_statuses,
    bridge_infos,
    rule_infos,
    supervisor_of,
)
from gateway.api.deps import Caller, Gw, Responses
from gateway.api.schemas import AdapterStatus, ComponentInfo, RuleInfo

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["components"])

_NOT_FOUND: Responses = {404: {"description": "No such adapter"}}
_RESTART: Responses = {**_NOT_FOUND, 409: {"description": "The adapter is disabled"}}


@router.get("/adapters", summary="Protocol adapters and their state")
async def list_adapters(gateway: Gw) -> list[AdapterStatus]:
    return adapter_statuses(gateway)


def _adapter(gateway: object, name: str) -> AdapterStatus:
    for adapter in adapter_statuses(gateway):
        if adapter.name == name:
            return adapter
    raise HTTPException(status.HTTP_404_NOT_FOUND, f"no adapter {name!r}")


@router.get("/adapters/{name}", summary="One adapter", responses=_NOT_FOUND)
async def get_adapter(gateway: Gw, name: str) -> AdapterStatus:
    return _adapter(gateway, name)


@router.post(
    "/adapters/{name}/restart",
    summary="Restart an adapter",
    responses=_RESTART,
)
async def restart_adapter(gateway: Gw, caller: Caller, name: str) -> AdapterStatus:
    _adapter(gateway, name)
    supervisor = supervisor_of(gateway, "adapters")
    if not isinstance(supervisor, Supervisor):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no adapter {name!r}")
    if await supervisor.restart(name) is False:
        # It exists (above): the supervisor refuses a disabled one, as /components does.
        raise HTTPException(status.HTTP_409_CONFLICT, f"the adapter {name!r} is disabled")
    log.info("adapter %s restarted through the API by %s", name, caller.name)
    return _adapter(gateway, name)


@router.get("/bridges", summary="MQTT bridges")
async def list_bridges(gateway: Gw) -> list[ComponentInfo]:
    return bridge_infos(gateway)


@router.get("/rules", summary="Rules of the rule engine")
async def list_rules(gateway: Gw) -> list[RuleInfo]:
    return rule_infos(gateway)
