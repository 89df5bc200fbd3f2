"""Walk the config models' type annotations.

Two readers need to know what the schema expects at a YAML path: the error renderer
(turning a pydantic ``loc`` into the path the user sees, and finding the valid keys for
a "did you mean" hint) and the reference generator (``docgen``). Both go through here,
so a new section model needs no code in either.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = [
    "Loc",
    "discriminator_of",
    "field_annotation",
    "is_model",
    "literal_values",
    "model_at",
    "nullable_members",
    "pick_union_member",
    "resolve_lazy",
    "strip_annotated",
    "walk_loc",
]

#: A path into the YAML document: mapping keys and list indices.
Loc = tuple[str | int, ...]

_SEQUENCES = (list, tuple, Sequence, frozenset, set)
_MAPPINGS = (dict, Mapping)


def is_model(tp: object) -> bool:
    """True when ``tp`` is a pydantic model class."""
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def strip_annotated(annotation: object) -> tuple[object, list[object]]:
    """Remove ``Annotated[...]`` layers; return the bare type and all metadata."""
    metadata: list[object] = []
    while get_origin(annotation) is Annotated:
        metadata.extend(annotation.__metadata__)  # type: ignore[attr-defined]
        annotation = get_args(annotation)[0]
    return annotation, metadata


def resolve_lazy(annotation: object) -> object:
    """The annotation a lazily resolved one stands for: metadata with a
    ``resolve_annotation()`` method (``gateway.config.models.adapters.RegisteredTypes``)
    replaces the annotation by what that returns; other annotations are returned as is."""
    _, metadata = strip_annotated(annotation)
    for item in metadata:
        resolve = getattr(item, "resolve_annotation", None)
        if callable(resolve):
            return resolve()
    return annotation


def nullable_members(annotation: object) -> tuple[list[object], bool]:
    """Split ``X | Y | None`` into ``[X, Y]`` and whether ``None`` is allowed."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        return members, len(members) != len(get_args(annotation))
    return [annotation], annotation is type(None)


def literal_values(annotation: object) -> tuple[object, ...] | None:
    """The values of a ``Literal[...]`` annotation, or None for other annotations."""
    bare, _ = strip_annotated(annotation)
    if get_origin(bare) is Literal:
        return get_args(bare)
    return None


def discriminator_of(metadata: Sequence[object]) -> str | None:
    """The discriminator field name declared in ``Field(discriminator=...)`` metadata."""
    for item in metadata:
        if isinstance(item, FieldInfo) and isinstance(item.discriminator, str):
            return item.discriminator
        discriminator = getattr(item, "discriminator", None)
        if isinstance(discriminator, str):
            return discriminator
    return None


# pydantic's name of a union member with a validator around it in an error location:
# ``function-wrap[_checks_despite_problems()]``, ``function-after[check(), Model]``.
_FUNCTION_TAG = re.compile(r"^function-(?:wrap|before|after|plain)\[(\w+)\(\)(?:, (.+))?\]$")


def pick_union_member(
    members: Sequence[object], discriminator: str | None, tag: object
) -> object | None:
    """The union member that pydantic names ``tag`` in an error location: a
    discriminator's value, a class name, a validator around a model
    (``function-wrap[validator()]``), a constrained type (``constrained-int``), a generic
    one (``tuple[str, ...]``) or a ``Literal`` (``literal['all']``)."""
    for member in members:
        if discriminator is not None and is_model(member):
            field = typing.cast(type[BaseModel], member).model_fields.get(discriminator)
            values = literal_values(field.annotation) if field is not None else None
            if values is not None and tag in values:
                return member
        if getattr(member, "__name__", None) == tag:
            return member
    if not isinstance(tag, str):
        return None
    function = _FUNCTION_TAG.match(tag)
    if function is not None:
        if function.group(2):
            return pick_union_member(members, discriminator, function.group(2))
        found = [
            member
            for member in members
            if is_model(strip_annotated(member)[0])
            and hasattr(strip_annotated(member)[0], function.group(1))
        ]
    elif tag.startswith("literal["):
        found = [m for m in members if literal_values(m) is not None]
    else:
        base = tag.removeprefix("constrained-").split("[", 1)[0]
        found = [m for m in members if _type_name(m) == base]
    return found[0] if len(found) == 1 else None


def _type_name(member: object) -> str | None:
    """How pydantic names a member's type in a location: ``int``, ``tuple`` (of
    ``tuple[str, ...]``), ``list``."""
    bare, _ = strip_annotated(member)
    origin = get_origin(bare)
    return getattr(origin if origin is not None else bare, "__name__", None)


def field_annotation(field: FieldInfo) -> object:
    """A field's annotation with the metadata pydantic moved into ``field.metadata``."""
    if field.metadata:
        return Annotated[(field.annotation, *field.metadata)]
    return field.annotation


def _field_annotation(field: FieldInfo) -> tuple[object, str | None]:
    discriminator = field.discriminator if isinstance(field.discriminator, str) else None
    return field_annotation(field), discriminator


def walk_loc(root: type[BaseModel], loc: Sequence[str | int]) -> tuple[Loc, object]:
    """Follow a pydantic error ``loc`` through the schema.

    Returns the YAML path (union tags that pydantic inserts into ``loc`` removed, dict
    ``[key]`` markers dropped) and the annotation found at the end (``None`` once the
    location leaves the schema, e.g. an unknown key).
    """
    path: list[str | int] = []
    annotation: object = root
    discriminator: str | None = None
    index = 0
    while index < len(loc):
        element = loc[index]
        index += 1
        if annotation is None:
            path.append(element)
            continue
        annotation = resolve_lazy(annotation)
        bare, metadata = strip_annotated(annotation)
        discriminator = discriminator_of(metadata) or discriminator
        members, _ = nullable_members(bare)
        if len(members) > 1:
            member = pick_union_member(members, discriminator, element)
            if member is not None:
                annotation, discriminator = member, None
                continue
            path.append(element)
            annotation = None
            continue
        bare, more = strip_annotated(members[0])
        discriminator = discriminator_of(more) or discriminator
        origin = get_origin(bare)
        if is_model(bare):
            path.append(element)
            model = typing.cast(type[BaseModel], bare)
            field = model.model_fields.get(element) if isinstance(element, str) else None
            if field is None:
                annotation = None
            else:
                annotation, discriminator = _field_annotation(field)
        elif origin in _SEQUENCES:
            path.append(element)
            items = [arg for arg in get_args(bare) if arg is not Ellipsis]
            annotation = items[0] if items else None
        elif origin in _MAPPINGS:
            path.append(element)
            pair = get_args(bare)
            annotation = pair[1] if len(pair) == 2 else None
            if index < len(loc) and loc[index] == "[key]":
                index += 1
                annotation = None
        else:
            path.append(element)
            annotation = None
    return tuple(path), annotation


def model_at(annotation: object) -> type[BaseModel] | None:
    """The model class an annotation (possibly optional or a union) describes."""
    if annotation is None:
        return None
    bare, _ = strip_annotated(resolve_lazy(annotation))
    members, _ = nullable_members(bare)
    models = [strip_annotated(member)[0] for member in members]
    models = [member for member in models if is_model(member)]
    if len(models) == 1:
        return typing.cast(type[BaseModel], models[0])
    return None
