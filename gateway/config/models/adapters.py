"""``adapters``: one entry per adapter instance, validated by the model its ``type`` names.

The adapter types and their config models come from the component registry
(``gateway/components/registry.py``); each type's model lives in its own
``adapters/<type>/config.py``, which imports no native library. The schema does not
import them when it is built: ``RegisteredTypes`` looks the models up when an entry is
validated (and when the error renderer or the reference generator asks for them), so the
``adapters`` package imports the gateway and never the reverse.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field, GetCoreSchemaHandler, TypeAdapter
from pydantic_core import core_schema

from gateway.components import registry
from gateway.components.component import ADAPTER
from gateway.config.models.adapter_base import AdapterConfigBase

__all__ = ["AdapterConfig", "RegisteredTypes", "adapter_config_classes"]


class RegisteredTypes:
    """``Annotated`` metadata: a value is validated by the config model of the registered
    type of ``kind`` that its ``type`` key names, as a union tagged by ``type`` would be.

    ``resolve_annotation()`` gives that union, for readers of the schema
    (``gateway.config.introspect``)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._cache: tuple[tuple[str, ...], TypeAdapter[Any]] | None = None

    def models(self) -> tuple[Any, ...]:
        return tuple(registry.load_config_model(entry) for entry in registry.types_of(self.kind))

    def resolve_annotation(self) -> Any:
        models = self.models()
        if len(models) == 1:
            return models[0]
        return Annotated[Union[models], Field(discriminator="type")]  # noqa: UP007

    def _adapter(self) -> TypeAdapter[Any]:
        key = tuple(entry.config for entry in registry.types_of(self.kind))
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, TypeAdapter(self.resolve_annotation()))
        return self._cache[1]

    def _validate(self, value: Any, info: core_schema.ValidationInfo) -> Any:
        # with the context: the file checks (`edgebus check`) reach the adapters' models
        return self._adapter().validate_python(value, context=info.context)

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.with_info_plain_validator_function(self._validate)


#: One entry of ``adapters``: the model of the adapter type it names.
AdapterConfig = Annotated[AdapterConfigBase, RegisteredTypes(ADAPTER)]


def adapter_config_classes() -> tuple[Any, ...]:
    """The config models of every registered adapter type (imports them)."""
    return RegisteredTypes(ADAPTER).models()
