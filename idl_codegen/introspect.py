"""cyclonedds classes -> the type description (:mod:`idl_codegen.model`).

The JSON codec and the JSON Schema emitter work on the type description. This module
rebuilds it from any cyclonedds-python class, so they serve generated packages, schemas
loaded with :func:`idl_codegen.load`, hand-written ``IdlStruct`` classes and types
``cyclonedds.dynamic`` discovered at run time alike.

It reads what cyclonedds records on the classes: type hints (with cyclonedds' own
resolution of string references), ``__idl_annotations__`` (extensibility, keylist,
nested, autoid) and ``__idl_field_annotations__`` (key, member id, IDL member name).
IDL ``wstring`` has no cyclonedds representation and reads back as ``string``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from cyclonedds.idl import IdlEnum, IdlStruct, IdlUnion
from cyclonedds.idl import types as cdt
from cyclonedds.idl._type_normalize import (
    WrapOpt,
    get_extended_type_hints,
    get_idl_annotations,
    get_idl_field_annotations,
)

from idl_codegen.model import (
    UNION_DISCRIMINATOR_MEMBER,
    ArrayType,
    EnumType,
    Member,
    NamedType,
    PrimitiveType,
    Schema,
    SequenceType,
    StringType,
    StructType,
    TypedefType,
    TypeRef,
    UnionCase,
    UnionType,
    Value,
)
from idl_codegen.naming import enumerator_idl_name

__all__ = ["Described", "describe", "idl_name"]

_PRIMITIVES: list[tuple[Any, str]] = [
    (cdt.int8, "int8"), (cdt.int16, "int16"), (cdt.int32, "int32"), (cdt.int64, "int64"),
    (cdt.uint8, "uint8"), (cdt.uint16, "uint16"), (cdt.uint32, "uint32"),
    (cdt.uint64, "uint64"), (cdt.byte, "octet"), (cdt.float32, "float32"),
    (cdt.float64, "float64"), (cdt.char, "char"), (cdt.wchar, "wchar"), (bool, "boolean"),
    (int, "int64"), (float, "float64"),
]


def idl_name(cls: type) -> str:
    """The fully qualified IDL name of a cyclonedds class (``a::b::T``)."""
    return str(getattr(cls, "__idl_typename__", cls.__name__)).replace(".", "::")


@dataclass(slots=True)
class Described:
    """The description of ``root`` and of everything it uses, with the Python class of
    each struct, union and enum, and the Python attribute of each member."""

    root: str
    schema: Schema
    classes: dict[str, type] = field(default_factory=dict)
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)


def describe(cls: type) -> Described:
    """Describe a cyclonedds ``IdlStruct``, ``IdlUnion`` or ``IdlEnum`` class."""
    if not isinstance(cls, type) or not issubclass(cls, IdlStruct | IdlUnion | IdlEnum):
        raise TypeError(f"{cls!r} is not a cyclonedds IdlStruct, IdlUnion or IdlEnum class")
    builder = _Builder()
    root = builder.named(cls)
    return Described(root, builder.schema, builder.classes, builder.attributes)


class _Builder:
    def __init__(self) -> None:
        self.schema = Schema()
        self.classes: dict[str, type] = {}
        self.attributes: dict[str, dict[str, str]] = {}

    def named(self, cls: type) -> str:
        name = idl_name(cls)
        if name in self.classes:
            return name
        self.classes[name] = cls
        if issubclass(cls, IdlEnum):
            self._enum(name, cls)
        elif issubclass(cls, IdlUnion):
            self._union(name, cls)
        else:
            self._struct(name, cls)
        return name

    def ref(self, hint: Any) -> TypeRef:
        for primitive, kind in _PRIMITIVES:
            if hint is primitive or (hint == primitive and type(hint) is type(primitive)):
                return PrimitiveType(kind)
        if hint is str:
            return StringType()
        if isinstance(hint, cdt.bounded_str):
            return StringType(hint.max_length)
        if isinstance(hint, cdt.sequence):
            return SequenceType(self.ref(hint.subtype), hint.max_length)
        if isinstance(hint, cdt.array):
            dims: list[int] = []
            inner: Any = hint
            while isinstance(inner, cdt.array):
                dims.append(inner.length)
                inner = inner.subtype
            return ArrayType(self.ref(inner), tuple(dims))
        if isinstance(hint, cdt.typedef):
            name = str(hint.name).replace(".", "::")
            if name not in self.schema.types:
                self.schema.types[name] = TypedefType(name, StringType())  # placeholder
                self.schema.types[name] = TypedefType(name, self.ref(hint.subtype))
            return NamedType(name)
        if isinstance(hint, type) and issubclass(hint, IdlStruct | IdlUnion | IdlEnum):
            return NamedType(self.named(hint))
        raise TypeError(f"{hint!r} has no IDL equivalent the JSON codec supports")

    # -- struct ------------------------------------------------------------------------

    def _struct(self, name: str, cls: type) -> None:
        base = cls.__bases__[0] if cls.__bases__ else IdlStruct
        base_name = None
        inherited: set[str] = set()
        if base is not IdlStruct and isinstance(base, type) and issubclass(base, IdlStruct):
            base_name = self.named(base)
            inherited = set(get_extended_type_hints(base))
        annotations = get_idl_annotations(cls)
        field_annotations = get_idl_field_annotations(cls)
        defaults = _dataclass_defaults(cls)
        members: list[Member] = []
        attributes: dict[str, str] = dict(self.attributes.get(base_name, {})) if base_name else {}
        for py, hint in get_extended_type_hints(cls).items():
            if py in inherited:
                continue
            notes = field_annotations.get(py, {})
            optional = isinstance(hint, WrapOpt)
            ref = self.ref(hint.inner if isinstance(hint, WrapOpt) else hint)
            member_name = str(notes.get("name", py))
            attributes[member_name] = py
            default = None if optional else self._default(ref, defaults.get(py))
            members.append(Member(
                name=member_name,
                type=ref,
                optional=optional,
                key=bool(notes.get("key", False)),
                member_id=notes.get("id"),
                default=default,
            ))
        keylist = annotations.get("keylist")
        base_keylist = get_idl_annotations(base).get("keylist") if base_name else None
        if keylist is not None and keylist == base_keylist:
            keylist = None
        by_python = {py: idl for idl, py in attributes.items()}
        self.attributes[name] = attributes
        self.schema.types[name] = StructType(
            name=name,
            members=tuple(members),
            base=base_name,
            extensibility=str(annotations.get("extensibility", "final")),
            nested=bool(annotations.get("nested", False)),
            autoid=str(annotations.get("autoid", "sequential")),
            keylist=tuple(by_python.get(k, k) for k in keylist) if keylist is not None else None,
        )

    def _default(self, ref: TypeRef, value: Any) -> Value | None:
        resolved = self.schema.resolve(ref)
        if value is None:
            return None
        if isinstance(resolved, EnumType) and isinstance(value, enum.Enum):
            return enumerator_idl_name(value.name)
        if isinstance(resolved, PrimitiveType) and resolved.kind == "wchar" \
                and isinstance(value, int):
            return chr(value)
        if isinstance(resolved, PrimitiveType | StringType) and isinstance(
                value, int | float | str | bool):
            return value
        return None

    # -- union -------------------------------------------------------------------------

    def _union(self, name: str, cls: type) -> None:
        hints = get_extended_type_hints(cls)  # also resolves the discriminator
        discriminator_hint = cls.__idl_discriminator__  # type: ignore[attr-defined]
        discriminator = self.ref(discriminator_hint)
        annotations = get_idl_annotations(cls)
        field_annotations = get_idl_field_annotations(cls)
        cases: list[UnionCase] = []
        attributes: dict[str, str] = {}
        for py, holder in hints.items():
            notes = field_annotations.get(py, {})
            member_name = str(notes.get("name", py))
            attributes[member_name] = py
            ref = self.ref(holder.subtype)
            if isinstance(holder, cdt.default):
                cases.append(UnionCase(member_name, ref, (), True, notes.get("id")))
                continue
            labels = tuple(_label(label, discriminator) for label in holder.labels)
            cases.append(UnionCase(member_name, ref, labels, False, notes.get("id")))
        if "discriminator" in attributes:
            raise TypeError(f"union {name}: {UNION_DISCRIMINATOR_MEMBER}")
        if cases and not any(case.labels for case in cases):
            raise TypeError(f"union {name} has only a default case, which cyclonedds-python "
                            "cannot serialize")
        self.attributes[name] = attributes
        self.schema.types[name] = UnionType(
            name=name,
            discriminator=discriminator,
            cases=tuple(cases),
            extensibility=str(annotations.get("extensibility", "final")),
            nested=bool(annotations.get("nested", False)),
            key_discriminator=bool(getattr(cls, "__idl_discriminator_is_key__", False)),
        )

    # -- enum --------------------------------------------------------------------------

    def _enum(self, name: str, cls: type) -> None:
        members = list(cls)  # type: ignore[call-overload]
        literals = tuple((enumerator_idl_name(m.name), int(m.value)) for m in members)
        default_value = getattr(cls, "__idl_enum_default_value__", None)
        default = next((literal for literal, value in literals if value == default_value),
                       literals[0][0] if literals else "")
        self.attributes[name] = {enumerator_idl_name(m.name): m.name for m in members}
        self.schema.types[name] = EnumType(name, literals, default)


def _label(label: Any, discriminator: TypeRef) -> Value:
    if isinstance(label, enum.Enum):
        return enumerator_idl_name(label.name)
    # typing caches Annotated[..., case(1, T)] and case(True, T) as one (they compare
    # equal), so a label can come back as the wrong one of bool and int
    if isinstance(discriminator, PrimitiveType) and discriminator.kind == "boolean":
        return bool(label)
    if isinstance(label, bool):
        return int(label)
    if isinstance(label, int | float | str):
        return label
    raise TypeError(f"union label {label!r} has no IDL equivalent")


def _dataclass_defaults(cls: type) -> dict[str, Any]:
    if not dataclasses.is_dataclass(cls):
        return {}
    # only plain defaults matter: primitive, string and enum members have no factory
    return {item.name: item.default for item in dataclasses.fields(cls)
            if item.default is not dataclasses.MISSING}
