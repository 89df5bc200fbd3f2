"""The registry of component types: an explicit table of import paths, imported lazily.

Importing this module imports no component, no config model and no native library; the
gateway never imports ``adapters``, ``bridge`` or ``spark_sink`` at module level, they
import the gateway. A type is one line of ``TYPES``::

    (ADAPTER, "loopback"): ComponentType(
        ADAPTER, "loopback",
        component="adapters.loopback.adapter:LoopbackAdapter",
        config="adapters.loopback.config:LoopbackAdapterConfig",
    ),

``extra`` and ``library`` name the pip extra and the import name of the native library:
when that import fails, loading the type raises ``AdapterUnavailable`` saying what to
install. ``api`` names an ``APIRouter`` (or a function returning one) that the HTTP API
mounts under ``/api/v1`` (see docs/adapters.md). ``protocol`` is the ``Origin``
protocol of what the instances publish: by default the type for an adapter (``zmq``),
the kind otherwise (``bridge``); the ACL names an instance ``<protocol>:<name>``.

Config sections become instances through ``LISTS`` (a list of entries with ``type`` and
``name``, e.g. ``adapters``) and ``SINGLETONS`` (one section, one instance, e.g.
``stream``). Entries whose type is not registered are not run (the gateway warns).

``register(entry)`` adds a type at run time and returns a function that removes it
again: for embedding edgebus, and for tests, whose component types live in the tests.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker_core.errors import AdapterUnavailable
from gateway.components.component import ADAPTER, BRIDGE, SINK, Spec

__all__ = [
    "LISTS",
    "SINGLETONS",
    "TYPES",
    "ComponentType",
    "load_api",
    "load_component",
    "load_config_model",
    "load_forget_absent",
    "lookup",
    "register",
    "specs_from_config",
    "types_of",
]


@dataclass(frozen=True, slots=True)
class ComponentType:
    kind: str  # adapter, bridge or sink
    name: str  # the `type:` of its configuration entries
    component: str  # "module:Class" of the component
    config: str  # "module:Class" of its configuration model
    extra: str | None = None  # the pip extra that installs its native library
    library: str | None = None  # the import name of that library
    api: str | None = None  # "module:name" of its APIRouter (or a function returning one)
    protocol: str | None = None  # Origin protocol; default: the type (adapters), the kind
    #: "module:function" called as ``function(hub, names)`` when the gateway starts its
    #: components, ``names`` those of the configured instances of every type naming the
    #: same function: it removes what the type left in the broker's store for instances
    #: no longer configured (a bridge's inbound QoS 2 records, ``bridge.records``).
    forget_absent: str | None = None

    @property
    def origin_protocol(self) -> str:
        if self.protocol is not None:
            return self.protocol
        return self.name if self.kind == ADAPTER else self.kind


TYPES: dict[tuple[str, str], ComponentType] = {
    (ADAPTER, "loopback"): ComponentType(
        ADAPTER,
        "loopback",
        component="adapters.loopback.adapter:LoopbackAdapter",
        config="adapters.loopback.config:LoopbackAdapterConfig",
    ),
    (ADAPTER, "someip"): ComponentType(
        ADAPTER,
        "someip",
        component="adapters.someip.adapter:SomeipAdapter",
        config="adapters.someip.config:SomeipAdapterConfig",
        extra="someip",
        library="someipy",
    ),
    (ADAPTER, "zmq"): ComponentType(
        ADAPTER,
        "zmq",
        component="adapters.zmq.adapter:ZmqAdapter",
        config="adapters.zmq.config:ZmqAdapterConfig",
        extra="zmq",
        library="zmq",
    ),
    (ADAPTER, "nng"): ComponentType(
        ADAPTER,
        "nng",
        component="adapters.nanomsg.adapter:NngAdapter",
        config="adapters.nanomsg.config:NngAdapterConfig",
        extra="nng",
        library="pynng",
    ),
    (ADAPTER, "dds"): ComponentType(
        ADAPTER,
        "dds",
        component="adapters.dds.adapter:DdsAdapter",
        config="adapters.dds.config:DdsAdapterConfig",
        extra="dds",
        library="cyclonedds",
    ),
    (ADAPTER, "ros2"): ComponentType(
        ADAPTER,
        "ros2",
        component="adapters.ros2.adapter:Ros2Adapter",
        config="adapters.ros2.config:Ros2AdapterConfig",
        extra="dds",
        library="cyclonedds",
    ),
    (BRIDGE, "mqtt"): ComponentType(
        BRIDGE,
        "mqtt",
        component="bridge.bridge:MqttBridge",
        config="gateway.config.models.bridges:BridgeConfig",
        forget_absent="bridge.records:forget_absent",
        api="bridge.api:router",
    ),
    (BRIDGE, "emqx_cloud"): ComponentType(
        BRIDGE,
        "emqx_cloud",
        component="bridge.bridge:MqttBridge",
        config="gateway.config.models.bridges:BridgeConfig",
        forget_absent="bridge.records:forget_absent",
    ),
    (BRIDGE, "aws_iot"): ComponentType(
        BRIDGE,
        "aws_iot",
        component="bridge.bridge:MqttBridge",
        config="gateway.config.models.bridges:BridgeConfig",
        forget_absent="bridge.records:forget_absent",
    ),
    (SINK, "stream"): ComponentType(
        SINK,
        "stream",
        component="spark_sink.sink:StreamSink",
        config="gateway.config.models.stream:StreamConfig",
        api="spark_sink.api:router",
    ),
}

#: Config sections holding a list of instances: section -> kind.
LISTS: dict[str, str] = {"adapters": ADAPTER, "bridges": BRIDGE}

#: Config sections that are one instance each: section -> (kind, type); the instance is
#: named after the section and runs when the section's ``enabled`` is true.
SINGLETONS: dict[str, tuple[str, str]] = {"stream": (SINK, "stream")}


def lookup(kind: str, type_name: str) -> ComponentType:
    """The registered type; KeyError when there is none."""
    return TYPES[(kind, type_name)]


def types_of(kind: str) -> list[ComponentType]:
    return [entry for (k, _), entry in TYPES.items() if k == kind]


def register(entry: ComponentType) -> Callable[[], None]:
    """Adds (or replaces) a type; returns a function restoring the table as it was."""
    key = (entry.kind, entry.name)
    previous = TYPES.get(key)
    TYPES[key] = entry

    def unregister() -> None:
        if previous is None:
            TYPES.pop(key, None)
        else:
            TYPES[key] = previous

    return unregister


def _import(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def load_config_model(entry: ComponentType) -> Any:
    return _import(entry.config)


def load_component(entry: ComponentType) -> Any:
    """The component class; ``AdapterUnavailable`` names what to install."""
    try:
        return _import(entry.component)
    except ImportError as exc:
        library = entry.library
        if library and exc.name and exc.name.split(".")[0] == library.split(".")[0]:
            raise AdapterUnavailable(
                f"the {entry.name} {entry.kind} needs the {library!r} package: "
                f"pip install 'edgebus[{entry.extra}]'"
            ) from exc
        raise


def load_forget_absent(entry: ComponentType) -> Any:
    """The type's ``forget_absent`` function, or None."""
    return None if entry.forget_absent is None else _import(entry.forget_absent)


def load_api(entry: ComponentType) -> Any:
    """The type's ``APIRouter`` (calling ``api`` when it names a function), or None."""
    if entry.api is None:
        return None
    found = _import(entry.api)
    return found() if callable(found) and not hasattr(found, "routes") else found


def specs_from_config(config: Any) -> tuple[list[Spec], list[tuple[str, str]]]:
    """The instances a ``GatewayConfig`` describes, and the enabled ones not run because
    their type is not registered, as ``(section, name)``."""
    specs: list[Spec] = []
    skipped: list[tuple[str, str]] = []
    for section, kind in LISTS.items():
        for item in getattr(config, section, ()):
            if (kind, item.type) in TYPES:
                specs.append(Spec.of(kind, item))
            elif getattr(item, "enabled", True):
                skipped.append((section, item.name))
    for section, (kind, type_name) in SINGLETONS.items():
        item = getattr(config, section, None)
        if item is None or not getattr(item, "enabled", True):
            continue
        if (kind, type_name) in TYPES:
            specs.append(Spec(kind, type_name, section, item))
        else:
            skipped.append((section, section))
    return specs, skipped
