"""The Adapter protocol, adapter configuration, and the registry of adapter types.

An adapter holds only its native side (DDS, ROS 2, ZeroMQ, NNG, SOME/IP, ...): it
turns native messages into Contexts and ``hub.publish``-es them, and serves outbound
traffic with ``async for ctx in hub.subscribe(...)``. ``run`` returns or raises when
the adapter stops; the gateway's supervisor restarts it with backoff. Call
``ready()`` once the native side is up, so its status reads ``running``.

Adapter types are registered in ``adapters.registry.REGISTRY``: an explicit table of import paths,
imported lazily. Every adapter folder has the same files: ``config.py`` (the
pydantic model, importable without the native library), ``codec.py`` (pure
``to_context`` / ``from_context``), ``adapter.py`` (the only importer of the native
library) and ``__init__.py``. A missing native library raises ``AdapterUnavailable``
naming the extra to install.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gateway.hub import HubClient

__all__ = ["Adapter"]


class Adapter(Protocol):
    """One running adapter instance, built from its config: ``Adapter(config)``."""

    async def run(self, hub: HubClient, ready: Callable[[], None]) -> None: ...
