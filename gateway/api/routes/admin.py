"""``/config`` (the effective configuration, secrets masked) and ``/reload``.

Masked: every secret of the schema (TLS key passwords, API keys and passwords), the
header values of `auth.http` (they carry tokens) and the user info of URLs.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from fastapi import APIRouter, HTTPException, status

from broker_core.errors import ConfigError
from gateway.api.deps import Caller, Gw
from gateway.api.masking import MASK, mask_url
from gateway.api.schemas import ReloadResult
from gateway.config import GatewayConfig

__all__ = ["MASK", "masked_config", "router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["config"])


def _mask(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        if key == "headers":
            return {name: MASK for name in value}
        return {name: _mask(item, name) for name, item in value.items()}
    if isinstance(value, list):
        return [_mask(item) for item in value]
    if isinstance(value, str) and key == "url":
        return mask_url(value)
    return value


def masked_config(config: GatewayConfig) -> dict[str, Any]:
    """``config`` as JSON data, secrets masked (schema secrets dump as ``**********``)."""
    masked: dict[str, Any] = _mask(config.model_dump(mode="json"))
    return masked


@router.get("/config", summary="The effective configuration, secrets masked")
async def get_config(gateway: Gw) -> dict[str, Any]:
    return masked_config(gateway.config)


@router.post(
    "/reload",
    summary="Re-read ACL, password file, mappings and rules (like SIGHUP)",
    responses={
        400: {"description": "The configuration file has problems; nothing changed"},
        501: {"description": "This gateway cannot reload"},
        503: {"description": "The gateway is stopping; nothing changed"},
    },
)
async def reload(gateway: Gw, caller: Caller) -> ReloadResult:
    reload_fn = getattr(gateway, "reload", None)
    if not callable(reload_fn):
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, "this gateway cannot reload")
    if getattr(gateway, "stopping", False) is True:
        # The API serves until the components have stopped: a reload now would start
        # what the shutdown is stopping (as SIGHUP then, gateway.serve: ignored).
        log.info(
            "reload requested through the API by %s ignored: the gateway is stopping", caller.name
        )
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "the gateway is stopping: not reloaded"
        )
    log.info("reload requested through the API by %s", caller.name)
    try:
        result = reload_fn()
        if inspect.isawaitable(result):
            result = await result
    except ConfigError as exc:  # each problem is logged at ERROR by Gateway.reload
        log.error("reload requested through the API by %s refused", caller.name)
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            {"message": "the configuration was not reloaded", "problems": exc.problems},
        ) from None
    reloaded = [str(item) for item in result] if isinstance(result, list | tuple) else []
    pending = getattr(gateway, "restart_required", [])  # Gateway.reload sets it
    return ReloadResult(reloaded=reloaded, restart_required=[str(name) for name in pending])
