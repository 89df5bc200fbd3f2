"""The base of every configuration model, and helpers the section models share.

``ConfigModel`` makes a model strict (unknown keys are errors) and immutable, and
evens out YAML's typing where pydantic's lax mode is too lax or too strict:

- ``true``/``false`` are not numbers: ``max_connections: yes`` is an error, not ``1``;
- integer choices written as strings (``max_qos: "1"``, the result of ``${QOS}``)
  count as integers, and text choices written as numbers (``protocol_version: 5``,
  ``min_version: 1.3``, which YAML reads as an int and a float) count as that text;
- an empty section (``mqtt:`` with nothing under it) means that section's defaults, and
  so does an empty list or mapping key that has a default (``rules:``, ``headers:``).

This happens in one model-level ``before`` validator that only rewrites values (it
never raises, so every field is still validated and reported), and not in per-field
validators, which pydantic forbids on the discriminator field of a tagged union.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    SecretStr,
    SerializationInfo,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import InitErrorDetails

from gateway.config.errors import FieldProblems
from gateway.config.introspect import (
    Loc,
    field_annotation,
    is_model,
    literal_values,
    nullable_members,
    strip_annotated,
)
from gateway.config.units import format_duration
from gateway.config.values import DurationSpec

__all__ = [
    "ConfigModel",
    "doc_default",
    "empty_means_none",
    "show_secret",
    "valid_as_written",
    "valid_items",
    "with_problems",
]


def show_secret(value: SecretStr | None, info: SerializationInfo) -> str | None:
    """A secret in a JSON dump: masked, in clear only when the dump's context asks for
    ``reveal_secrets`` (the loader's copy of the configuration); for field serializers."""
    if value is None:
        return None
    if isinstance(info.context, dict) and info.context.get("reveal_secrets"):
        return value.get_secret_value()
    return str(value)


def empty_means_none(value: Any) -> Any:
    """``""`` as None, for a "before" validator: ``keyfile_password: ${KEY_PASSWORD:-}``
    with the variable unset."""
    return None if value == "" else value


def doc_default(text: str) -> dict[str, Any]:
    """``json_schema_extra`` naming a default that is computed, for the reference."""
    return {"doc_default": text}


def with_problems(exc: ValidationError, problems: list[tuple[Loc, str]]) -> ValidationError:
    """``exc`` and ``problems`` (paths relative to the model being validated) as one
    error: a wrap validator raises it so that a check between keys reports along with
    the problems of other keys, which keep ``handler`` from returning a model."""
    if not problems:
        return exc
    details: list[InitErrorDetails] = []
    for error in exc.errors(include_url=False):
        detail = InitErrorDetails(type=error["type"], loc=error["loc"], input=error["input"])
        if "ctx" in error:
            detail["ctx"] = error["ctx"]
        details.append(detail)
    found = FieldProblems(problems)
    details.append(InitErrorDetails(type="value_error", loc=(), input=None, ctx={"error": found}))
    return ValidationError.from_exception_data(exc.title, details)


def valid_as_written(
    model: type[BaseModel], name: str, data: Mapping[str, Any], context: Any
) -> Any:
    """Key ``name`` of ``data`` (a ``model`` as written) validated alone, or its default
    when absent; raises ``ValidationError``. For ``checks_as_written``."""
    field = model.model_fields[name]
    if data.get(name) is None:
        return field.get_default(call_default_factory=True)
    annotation: Any = field.annotation
    if field.metadata:
        annotation = Annotated[annotation, *field.metadata]
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    return adapter.validate_python(data[name], context=context)


def valid_items(model: type[BaseModel], items: Any, context: Any) -> list[Any]:
    """Each entry of the list ``items`` (as written) validated as a ``model``, None for
    one that has problems (reported where it is validated). For ``checks_as_written``."""
    if not isinstance(items, list | tuple):
        return []
    valid: list[Any] = []
    for item in items:
        try:
            valid.append(model.model_validate(item, context=context))
        except ValidationError:
            valid.append(None)
    return valid


class _NotANumber:
    """Stands in for ``true``/``false`` given to a number, so that pydantic reports
    "expected an integer, got true" instead of taking it as 1."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __str__(self) -> str:
        return "true" if self.value else "false"

    __repr__ = __str__


def _takes_bool(annotation: object) -> bool:
    """False when ``annotation`` takes numbers (or integer choices) but not booleans."""
    bare, _ = strip_annotated(annotation)
    members, _ = nullable_members(bare)
    numeric = False
    for member in members:
        member, metadata = strip_annotated(member)
        if any(hasattr(item, "doc_type") for item in metadata):
            return True  # a value type from gateway.config.values rejects it itself
        values = literal_values(member)
        if member is bool or (values is not None and any(isinstance(v, bool) for v in values)):
            return True
        if member in (int, float) or (values and all(isinstance(v, int) for v in values)):
            numeric = True
        else:
            return True
    return not numeric


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


class _WrittenNumber(str):
    """A YAML number given to a choice of strings (``protocol_version: 5``): the text
    the choice is matched with, shown in a problem as the number it was (``got 5``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__str__(self)


def _text_choice(annotation: object, value: int | float) -> object:
    """``5`` -> ``"5"``, ``1.3`` -> ``"1.3"`` when ``annotation`` is a ``Literal`` of
    strings: the number as written, like any quoted value. A number is left as it is
    where a member takes numbers (``int | Literal["all"]``)."""
    text = str(value) if isinstance(value, int) else repr(value)
    bare, _ = strip_annotated(annotation)
    members = nullable_members(bare)[0]
    if any(strip_annotated(member)[0] in (int, float) for member in members):
        return value
    for member in members:
        values = literal_values(member)
        if values and all(isinstance(v, str) for v in values):
            return _WrittenNumber(text)
    return value


_CONTAINERS = (tuple, list, Sequence, dict, Mapping)


def _empty_means_default(annotation: object) -> bool:
    """True when a null value of a key of this type stands for its default: a section
    (a model), or a list or mapping that does not take null itself."""
    bare, _ = strip_annotated(annotation)
    members, nullable = nullable_members(bare)
    if nullable or len(members) != 1:
        return False
    member = strip_annotated(members[0])[0]
    return is_model(member) or get_origin(member) in _CONTAINERS or member in _CONTAINERS


class ConfigModel(BaseModel):
    """Strict, frozen base of every configuration section."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_default=False,
        hide_input_in_errors=False,
    )

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[Loc, str]]:
        """The checks between keys (a model's ``after`` validator) that can still be made
        when the keys in ``failed`` have problems of their own, on ``data`` as written:
        pydantic runs no ``after`` validator of a model with an invalid key, and
        ``edgebus check`` reports every problem in one run. Each model with such checks
        overrides it, running only those whose keys are all valid. Paths are relative to
        the model."""
        return []

    @model_validator(mode="wrap")
    @classmethod
    def _checks_despite_problems(
        cls, data: Any, handler: ModelWrapValidatorHandler[Any], info: ValidationInfo
    ) -> Any:
        try:
            model = handler(data)
        except ValidationError as exc:
            if not isinstance(data, Mapping) or cls.checks_as_written.__func__ is _NO_CHECKS:  # type: ignore[attr-defined]
                raise
            errors = exc.errors(include_url=False)
            if any(not error["loc"] for error in errors):
                raise  # the model's own checks ran (and failed), or it is not a mapping
            failed = frozenset(str(error["loc"][0]) for error in errors)
            problems = cls.checks_as_written(data, failed, info.context)
            raise with_problems(exc, problems) from None
        waits = _waits_past_the_longest(model)
        if waits:
            # raised here, the model's own checks between keys do not run: those as written
            # are reported with it
            checks = cls.checks_as_written.__func__ is not _NO_CHECKS  # type: ignore[attr-defined]
            written = checks and isinstance(data, Mapping)
            more = cls.checks_as_written(data, frozenset(), info.context) if written else []
            raise FieldProblems([*waits, *more])
        return model

    @model_validator(mode="before")
    @classmethod
    def _even_out_yaml(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        evened: dict[Any, Any] = {}
        for name, value in data.items():
            field = cls.model_fields.get(name) if isinstance(name, str) else None
            if field is None:
                evened[name] = value
                continue
            annotation = field_annotation(field)
            bare = strip_annotated(annotation)[0]
            if value is None and (
                is_model(bare) or (not field.is_required() and _empty_means_default(annotation))
            ):
                continue  # an empty section, list or mapping: its default
            if isinstance(value, bool) and not _takes_bool(annotation):
                value = _NotANumber(value)
            elif isinstance(value, str):
                value = _int_choice(annotation, value)
            elif isinstance(value, int | float):
                value = _text_choice(annotation, value)
            evened[name] = value
        return evened


def _waits_past_the_longest(model: BaseModel) -> list[tuple[Loc, str]]:
    """A first wait longer than the longest (``restart_backoff`` and
    ``restart_backoff_max``, ``delay`` and ``max_delay``): at the key written, the longest
    when both are."""
    problems: list[tuple[Loc, str]] = []
    for first, longest in _first_and_longest(type(model)):
        if getattr(model, first) > getattr(model, longest):
            key = longest if longest in model.model_fields_set else first
            problems.append(
                (
                    (key,),
                    f"{longest} ({format_duration(getattr(model, longest))}) must be at"
                    f" least {first} ({format_duration(getattr(model, first))})",
                )
            )
    return problems


@functools.cache
def _first_and_longest(model: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """The pairs of durations of ``model`` named ``x`` and ``x_max`` or ``max_x``."""
    fields = model.model_fields

    def duration(name: str) -> bool:
        return name in fields and any(
            isinstance(item, DurationSpec) for item in fields[name].metadata
        )

    return tuple(
        (name, longest)
        for name in fields
        for longest in (f"{name}_max", f"max_{name}")
        if duration(name) and duration(longest)
    )


_NO_CHECKS = ConfigModel.checks_as_written.__func__  # type: ignore[attr-defined]
