"""What the API needs from the gateway, and the parts that other issues are building.

The gateway offers ``config``, ``broker`` and ``addresses`` (``GatewayView``). Adapters,
bridges and rules are reached through small protocols, looked up with ``getattr`` so
the API works before they exist:

- ``gateway.adapters``: a ``Supervisor`` (``gateway.components.KindView``)
  with ``statuses()`` (one dict per adapter: ``name``, ``state`` and optionally
  ``type``, ``last_error``, ``restarts``, ``stats`` with ``published``, ``dropped``
  and ``queue_depth``, anything else) and ``async restart(name)``;
- ``gateway.bridges``: a ``Supervisor`` likewise (``restart`` is not used yet);
- ``gateway.rules``: an object with ``statuses()`` (``name``, ``state``, ``hits``).

Without one, adapters and bridges are an empty list and rules and bridges are listed
from the configuration sections of those names, if the schema has them, as
``configured``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from broker_core.broker import Broker
from gateway.api.schemas import AdapterStatus, ComponentInfo, RuleInfo
from gateway.config import GatewayConfig

__all__ = [
    "GatewayView",
    "StatusSource",
    "Supervisor",
    "adapter_stat",
    "adapter_statuses",
    "bridge_infos",
    "is_up",
    "rule_infos",
    "supervisor_of",
]

_RUNNING = "running"


class GatewayView(Protocol):
    """The parts of ``gateway.app.Gateway`` the API reads."""

    config: GatewayConfig
    broker: Broker
    addresses: dict[str, tuple[str, int]]


@runtime_checkable
class StatusSource(Protocol):
    def statuses(self) -> list[dict[str, Any]]: ...


@runtime_checkable
class Supervisor(StatusSource, Protocol):
    async def restart(self, name: str) -> object: ...


def supervisor_of(gateway: object, attribute: str) -> StatusSource | None:
    found = getattr(gateway, attribute, None)
    return found if isinstance(found, StatusSource) else None


def _split(status: dict[str, Any], known: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    names = set(known)
    return (
        {key: value for key, value in status.items() if key in names},
        {key: value for key, value in status.items() if key not in names},
    )


def adapter_statuses(gateway: object) -> list[AdapterStatus]:
    source = supervisor_of(gateway, "adapters")
    if source is None:
        return []
    out = []
    for status in source.statuses():
        fields, details = _split(status, ("name", "type", "state", "last_error", "restarts"))
        fields.setdefault("state", "unknown")
        out.append(AdapterStatus(**fields, details=details))
    return out


def _configured(gateway: object, section: str) -> list[dict[str, Any]]:
    config = getattr(gateway, "config", None)
    items = getattr(config, section, None) or ()
    out = []
    for index, item in enumerate(items):
        if hasattr(item, "summary"):  # what the section's model says about an entry
            out.append({"state": "configured", **item.summary()})
            continue
        dumped = item.model_dump(mode="json") if hasattr(item, "model_dump") else {}
        name = dumped.get("name") or dumped.get("id") or f"{section}[{index}]"
        out.append({"name": str(name), "type": dumped.get("type"), "state": "configured"})
    return out


def bridge_infos(gateway: object) -> list[ComponentInfo]:
    source = supervisor_of(gateway, "bridges")
    statuses = source.statuses() if source is not None else _configured(gateway, "bridges")
    out = []
    for status in statuses:
        fields, details = _split(status, ("name", "type", "state"))
        fields.setdefault("state", "unknown")
        out.append(ComponentInfo(**fields, details=details))
    return out


def rule_infos(gateway: object) -> list[RuleInfo]:
    source = supervisor_of(gateway, "rules")
    statuses = source.statuses() if source is not None else _configured(gateway, "rules")
    out = []
    for status in statuses:
        fields, details = _split(status, ("name", "state", "hits"))
        fields.setdefault("state", "unknown")
        out.append(RuleInfo(**fields, details=details))
    return out


def is_up(state: str) -> bool:
    return state == _RUNNING


def adapter_stat(status: AdapterStatus, name: str) -> int:
    """A number from the ``stats`` an adapter reports (``published``, ...); 0 if none."""
    stats = status.details.get("stats")
    value = stats.get(name) if isinstance(stats, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
