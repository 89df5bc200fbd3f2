"""``/api/v1/bridges/...``: bridges added, changed, removed, paused and resumed at run time.

Mounted by the HTTP API behind its authentication (the registry's ``api`` of the
``mqtt`` bridge type). ``GET /bridges`` (the list) is the API's own; these routes use
the supervisor's run-time operations:

- ``POST /bridges``: a new bridge from a ``bridges[]`` entry as JSON (201); 409 when the
  name is taken, 422 naming every problem of the entry, the files it names included
  (checked as ``edgebus check`` checks a file's bridges: ``tls.cafile: cannot read ...``),
  and its local filters against the running broker's ``mqtt.max_topic_levels``
  (``forwards[0].local: the filter ... has 130 levels, ...``);
- ``GET /bridges/{name}``: its supervisor status, its link (connected or reconnecting,
  and why), its counters (queue depth, oldest queued age, sent / acked / dropped);
- ``PUT /bridges/{name}``: a new configuration; the bridge restarts with it, its queue
  kept; 400 when the body's ``name`` is not the path's;
- ``DELETE /bridges/{name}``: stops and removes it (204); its queue file stays in the
  data directory, and a bridge added again under that name sends what it holds; its
  inbound QoS 2 records go (``bridge.records``). 409,
  naming them, while rules forward through it (their actions would fail on every
  result): delete or change those rules first;
- ``POST /bridges/{name}/pause`` and ``/resume``: a paused bridge is stopped (it
  neither connects nor queues) until resumed.

Changes made here last until the gateway stops or its configuration file is reloaded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Response, status
from pydantic import BaseModel, Field, ValidationError

from gateway.api.auth import Principal
from gateway.api.deps import Caller, Components, Gw, Responses
from gateway.components import BRIDGE, Spec, Supervisor
from gateway.config.errors import format_path, problems_from_validation_error
from gateway.config.files import FILE_CHECKS
from gateway.config.models.bridges import BridgeConfig
from gateway.config.models.topic_levels import component_filter_problems

__all__ = ["BridgeView", "router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["bridges"])

BridgeBody = Annotated[
    dict[str, Any], Body(description="A `bridges[]` entry (docs/configuration.md), as JSON.")
]

_NOT_FOUND: Responses = {404: {"description": "No such bridge"}}
_INVALID: Responses = {422: {"description": "The bridge's configuration is not valid"}}


class BridgeView(BaseModel):
    """One bridge: its supervisor's status, its link and its configuration."""

    name: str
    type: str
    state: str = Field(
        description="The supervisor's: `running` (connected), `degraded` (not connected:"
        " `reason` says why), `backing_off`, `paused`, `stopped`, ..."
    )
    reason: str | None = Field(default=None, description="Why it is `degraded`.")
    last_error: str | None = None
    restarts: int = 0
    link: dict[str, Any] = Field(
        default_factory=dict,
        description="`link` (`connecting`, `connected`, `reconnecting`, `stopped`),"
        " `reason`, `server`, `client_id`, `session_present`, `connected_since`, `window`.",
    )
    stats: dict[str, int | float] = Field(
        default_factory=dict,
        description="`queue_depth`, `queue_bytes`, `oldest_age_s`, `inflight`, `sent`,"
        " `acked`, `rejected`, `dropped` and `dropped_<reason>`, `received`,"
        " `inbound_qos2_pending`, `connected`, ...",
    )
    config: dict[str, Any] = Field(default_factory=dict, description="What it bridges.")


def _view(supervisor: Supervisor, name: str) -> BridgeView:
    found = supervisor.status(BRIDGE, name)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no bridge {name!r}")
    component = supervisor.instance(BRIDGE, name)
    describe = getattr(component, "describe", None)
    spec = next(s for s in supervisor.specs(BRIDGE) if s.name == name)
    summary = getattr(spec.config, "summary", None)
    return BridgeView(
        name=name,
        type=found["type"],
        state=found["state"],
        reason=found["reason"],
        last_error=found["last_error"],
        restarts=found["restarts"],
        link=describe() if callable(describe) else {},
        stats=found["component_stats"],
        config=summary() if callable(summary) else {},
    )


def _config(body: dict[str, Any], max_levels: int, name: str | None = None) -> BridgeConfig:
    """The bridge ``body`` describes, or 422 naming each problem: of the schema, of the
    files it names, and local filters deeper than the running broker's
    ``mqtt.max_topic_levels`` (``max_levels``)."""
    if name is not None:
        if body.get("name", name) != name:
            # A well-formed request refused, as PUT /rules answers it (docs/api.md).
            raise HTTPException(
                status.HTTP_400_BAD_REQUEST,
                f"the body names the bridge {body.get('name')!r}, the path {name!r}",
            )
        body = {**body, "name": name}
    try:
        # The files it names are checked as `edgebus check` checks a file's bridges:
        # a TLS file that cannot be loaded is refused, not left to a degraded bridge.
        config = BridgeConfig.model_validate(body, context=FILE_CHECKS)
    except ValidationError as exc:
        problems = problems_from_validation_error(exc, BridgeConfig, lambda loc: 0)
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [f"{format_path(p.path) or 'bridge'}: {p.message}" for p in problems],
        ) from None
    too_deep = component_filter_problems("bridges", config, max_levels)
    if too_deep:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [f"{format_path(path)}: {message}" for path, message in too_deep],
        )
    return config


@router.post(
    "/bridges",
    status_code=status.HTTP_201_CREATED,
    summary="Add a bridge",
    responses={409: {"description": "A bridge of that name exists"}, **_INVALID},
)
async def add_bridge(
    supervisor: Components,
    gateway: Gw,
    caller: Caller,
    body: BridgeBody,
) -> BridgeView:
    config = _config(body, gateway.broker.limits.max_topic_levels)
    try:
        supervisor.add(Spec.of(BRIDGE, config))
    except ValueError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except RuntimeError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)) from None
    log.info("bridge %s added through the API by %s", config.name, caller.name)
    return _view(supervisor, config.name)


@router.get("/bridges/{name}", summary="One bridge", responses=_NOT_FOUND)
async def get_bridge(supervisor: Components, name: str) -> BridgeView:
    return _view(supervisor, name)


@router.put(
    "/bridges/{name}",
    summary="Change a bridge (it restarts with the new configuration)",
    responses={
        **_NOT_FOUND,
        **_INVALID,
        400: {"description": "The body names another bridge than the path"},
    },
)
async def update_bridge(
    supervisor: Components,
    gateway: Gw,
    caller: Caller,
    name: str,
    body: BridgeBody,
) -> BridgeView:
    _view(supervisor, name)
    config = _config(body, gateway.broker.limits.max_topic_levels, name)
    if not supervisor.update(Spec.of(BRIDGE, config)):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no bridge {name!r}")
    log.info("bridge %s changed through the API by %s", name, caller.name)
    return _view(supervisor, name)


@router.delete(
    "/bridges/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove a bridge",
    responses={**_NOT_FOUND, 409: {"description": "Rules forward through the bridge"}},
)
async def delete_bridge(supervisor: Components, gateway: Gw, caller: Caller, name: str) -> Response:
    _view(supervisor, name)
    users = getattr(gateway, "rules_using_bridge", None)  # gateway.app.Gateway's
    names: list[str] = list(users(name)) if callable(users) else []
    if names:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"the bridge {name!r} is used by rule{'s' if len(names) > 1 else ''}"
            f" {', '.join(map(repr, names))}: delete or change"
            f" {'them' if len(names) > 1 else 'it'} first",
        )
    if not supervisor.remove(BRIDGE, name):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no bridge {name!r}")
    log.info("bridge %s removed through the API by %s", name, caller.name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


_OPERATION: Responses = {**_NOT_FOUND, 409: {"description": "The bridge is disabled"}}


def _operation(
    supervisor: Supervisor, caller: Principal, name: str, operation: Callable[[str, str], bool]
) -> BridgeView:
    _view(supervisor, name)
    if not operation(BRIDGE, name):
        raise HTTPException(status.HTTP_409_CONFLICT, f"the bridge {name!r} is disabled")
    log.info("bridge %s: %s through the API by %s", name, operation.__name__, caller.name)
    return _view(supervisor, name)


@router.post("/bridges/{name}/pause", summary="Stop a bridge until resumed", responses=_OPERATION)
async def pause_bridge(supervisor: Components, caller: Caller, name: str) -> BridgeView:
    return _operation(supervisor, caller, name, supervisor.pause)


@router.post("/bridges/{name}/resume", summary="Resume a paused bridge", responses=_OPERATION)
async def resume_bridge(supervisor: Components, caller: Caller, name: str) -> BridgeView:
    return _operation(supervisor, caller, name, supervisor.resume)
