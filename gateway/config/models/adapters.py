"""``adapters``: one entry per adapter instance, discriminated by ``type``.

The adapter types come from the registry (``adapters/registry.py``); each type's model
lives in its own ``adapters/<type>/config.py``, which imports no native library.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field

from adapters.registry import REGISTRY, load_config_class

__all__ = ["AdapterConfig", "adapter_config_classes"]


def adapter_config_classes() -> tuple[Any, ...]:
    return tuple(load_config_class(name) for name in REGISTRY)


_classes = adapter_config_classes()
if len(_classes) == 1:
    AdapterConfig: Any = _classes[0]
else:  # pragma: no cover - one adapter type is registered until the protocol adapters land
    AdapterConfig = Annotated[Union[_classes], Field(discriminator="type")]  # noqa: UP007
