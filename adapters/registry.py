"""The registry of adapter types: an explicit table of import paths, imported lazily.

Importing this module imports no adapter and no native library.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from broker_core.errors import AdapterUnavailable

__all__ = ["REGISTRY", "AdapterType", "load_adapter_class", "load_config_class"]


@dataclass(frozen=True, slots=True)
class AdapterType:
    config: str  # "module:Class" of the config model
    adapter: str  # "module:Class" of the adapter
    extra: str | None  # the pip extra that installs its native library
    library: str | None  # the import name of the native library


REGISTRY: dict[str, AdapterType] = {
    "loopback": AdapterType(
        "adapters.loopback.config:LoopbackAdapterConfig",
        "adapters.loopback.adapter:LoopbackAdapter",
        None,
        None,
    ),
}


def _import(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def load_config_class(type_name: str) -> Any:
    return _import(REGISTRY[type_name].config)


def load_adapter_class(type_name: str) -> Any:
    """The adapter class of ``type_name``; AdapterUnavailable names what to install."""
    entry = REGISTRY[type_name]
    try:
        return _import(entry.adapter)
    except ImportError as exc:
        if entry.library and exc.name and exc.name.split(".")[0] == entry.library.split(".")[0]:
            raise AdapterUnavailable(
                f"the {type_name} adapter needs the {entry.library!r} package: "
                f"pip install 'edgebus[{entry.extra}]'"
            ) from exc
        raise
