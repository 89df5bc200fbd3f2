"""The component seam: adapters, bridges and sinks plug into the gateway the same way.

A component author needs these names (docs/adapters.md, "Writing a component"):

- ``Component``: the class protocol, ``cls(config)`` and ``async run(hub, host)``, with
  optional ``async stop()`` and ``stats()``;
- ``Host``: ``data_dir``, ``ready()``, ``degraded(reason)``, ``inbox(...)``,
  ``stopping``;
- ``Inbox``: the bounded hand-off from a library's threads to the loop;
- ``BatchWriter``: a durable store written on its own thread, for durable taps;
- ``gateway.hub.HubClient``: ``publish``, ``publish_safe``, ``subscribe``, ``tap``;
- ``registry``: the table of types (``ComponentType``), one line per type.

The ``Supervisor`` runs them all; the gateway builds it.
"""

from __future__ import annotations

from gateway.components import registry
from gateway.components.component import ADAPTER, BRIDGE, KINDS, SINK, Component, Spec
from gateway.components.durable import BatchWriter
from gateway.components.host import ComponentStatus, Host
from gateway.components.inbox import BLOCK, DROP_NEW, DROP_OLDEST, Inbox
from gateway.components.registry import ComponentType
from gateway.components.supervisor import KindView, Supervisor

__all__ = [
    "ADAPTER",
    "BLOCK",
    "BRIDGE",
    "DROP_NEW",
    "DROP_OLDEST",
    "KINDS",
    "SINK",
    "BatchWriter",
    "Component",
    "ComponentStatus",
    "ComponentType",
    "Host",
    "Inbox",
    "KindView",
    "Spec",
    "Supervisor",
    "registry",
]
