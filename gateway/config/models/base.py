"""The base of every configuration model, and helpers the section models share.

``ConfigModel`` makes a model strict (unknown keys are errors) and immutable, and
evens out YAML's typing where pydantic's lax mode is too lax or too strict:

- ``true``/``false`` are not numbers: ``max_connections: yes`` is an error, not ``1``;
- integer choices written as strings (``max_qos: "1"``, the result of ``${QOS}``)
  count as integers;
- an empty section (``mqtt:`` with nothing under it) means that section's defaults.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from gateway.config.errors import expected_choices, show_value
from gateway.config.introspect import (
    field_annotation,
    is_model,
    literal_values,
    nullable_members,
    strip_annotated,
)

__all__ = ["ConfigModel", "doc_default"]


def doc_default(text: str) -> dict[str, Any]:
    """``json_schema_extra`` naming a default that is computed, for the reference."""
    return {"doc_default": text}


def _reject_bool(annotation: object, value: bool) -> None:
    """Raise when ``annotation`` takes numbers but not ``true``/``false``."""
    bare, _ = strip_annotated(annotation)
    members, _ = nullable_members(bare)
    kinds: list[object] = []
    for member in members:
        member, metadata = strip_annotated(member)
        if any(hasattr(item, "doc_type") for item in metadata):
            return  # a value type from gateway.config.values parses it and says why
        values = literal_values(member)
        if member is bool or (values is not None and any(isinstance(v, bool) for v in values)):
            return
        kinds.append(member if values is None else values)
    for kind in kinds:
        if kind is int:
            raise ValueError(f"expected an integer, got {show_value(value)}")
        if kind is float:
            raise ValueError(f"expected a number, got {show_value(value)}")
        if isinstance(kind, tuple) and all(isinstance(v, int) for v in kind):
            raise ValueError(f"expected {expected_choices(kind)}, got {show_value(value)}")


def _int_choice(annotation: object, value: str) -> object:
    """``"1"`` -> ``1`` when ``annotation`` is a ``Literal`` of integers."""
    bare, _ = strip_annotated(annotation)
    for member in nullable_members(bare)[0]:
        values = literal_values(member)
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            text = value.strip()
            if text.lstrip("-").isdigit():
                return int(text)
    return value


class ConfigModel(BaseModel):
    """Strict, frozen base of every configuration section."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_default=False,
        hide_input_in_errors=False,
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_sections_mean_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        empty = [
            name
            for name, value in data.items()
            if value is None
            and name in cls.model_fields
            and is_model(strip_annotated(cls.model_fields[name].annotation)[0])
        ]
        return {name: value for name, value in data.items() if name not in empty}

    @field_validator("*", mode="before")
    @classmethod
    def _yaml_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name is None:
            return value
        annotation = field_annotation(cls.model_fields[info.field_name])
        if isinstance(value, bool):
            _reject_bool(annotation, value)
        elif isinstance(value, str):
            return _int_choice(annotation, value)
        return value
