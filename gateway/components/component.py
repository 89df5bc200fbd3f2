"""What a component is: the protocol its class follows, its kinds, its ``Spec``.

A component is everything that is not the broker and talks to the outside: a protocol
adapter (``adapter``), a bridge to a remote broker (``bridge``), a sink such as the
stream log or the rule engine (``sink``). All plug in the same way::

    class MyAdapter:
        def __init__(self, config: MyAdapterConfig) -> None: ...

        async def run(self, hub: HubClient, host: Host) -> None:
            ...                      # open the native side
            host.ready()             # status: running
            ...                      # serve until cancelled or host.stopping is set

        # optional
        async def stop(self) -> None: ...          # drain and flush, then run() returns
        def stats(self) -> dict[str, int | float]: ...  # own counters, in /metrics and the API

``run`` returning while the component should run, or raising, is a failure: the
supervisor restarts it with backoff. See docs/adapters.md, "Writing a component".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gateway.components.host import Host
    from gateway.hub import HubClient

__all__ = ["ADAPTER", "BRIDGE", "KINDS", "SINK", "Component", "Spec"]

ADAPTER = "adapter"
BRIDGE = "bridge"
SINK = "sink"
KINDS = (ADAPTER, BRIDGE, SINK)


class Component(Protocol):
    """One running component instance, built from its config: ``cls(config)``.

    Optional methods the supervisor uses when present: ``async stop()`` (asked before a
    stop, restart, pause or removal; finish the work in hand and let ``run`` return) and
    ``stats() -> Mapping[str, int | float]`` (the component's own counters).
    """

    async def run(self, hub: HubClient, host: Host) -> None: ...


@dataclass(frozen=True, slots=True)
class Spec:
    """One component instance to supervise: its kind, registered type, name and config.

    ``config`` is handed to the component's constructor as it is. Names are unique
    within a kind.
    """

    kind: str
    type: str
    name: str
    config: Any
    enabled: bool = True
    restart_backoff_s: float = 1.0
    restart_backoff_max_s: float = 60.0

    @classmethod
    def of(cls, kind: str, config: Any) -> Spec:
        """The spec of a config model with ``type`` and ``name`` (and, when it has them,
        ``enabled``, ``restart_backoff`` and ``restart_backoff_max``, as every adapter's)."""
        return cls(
            kind,
            config.type,
            config.name,
            config,
            getattr(config, "enabled", True),
            getattr(config, "restart_backoff", 1.0),
            getattr(config, "restart_backoff_max", 60.0),
        )
