"""The type description: IDL types after resolution, independent of any output.

This is what every later stage reads: the Python and JSON Schema emitters, and the
JSON codec. The resolver builds it from IDL; :mod:`idl_codegen.introspect` builds the
same description back from cyclonedds classes, which is how one codec serves generated
modules, loaded schemas and types discovered at run time alike.

Names are fully qualified IDL names (``HelloWorldData::Msg``). Typedefs stay named
(:class:`NamedType`) so that outputs can keep them; :meth:`Schema.resolve` sees
through them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "FLOAT_KINDS",
    "INTEGER_KINDS",
    "INTEGER_RANGES",
    "PRIMITIVE_KINDS",
    "UNION_DISCRIMINATOR_MEMBER",
    "ArrayType",
    "Constant",
    "Declared",
    "EnumType",
    "Member",
    "NamedType",
    "PrimitiveType",
    "Schema",
    "SequenceType",
    "StringType",
    "StructType",
    "TypeRef",
    "TypedefType",
    "UnionCase",
    "UnionType",
    "Value",
    "named_in",
    "union_default",
    "zero_value",
]

INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "octet": (0, 0xFF),
    "int8": (-0x80, 0x7F),
    "uint8": (0, 0xFF),
    "int16": (-0x8000, 0x7FFF),
    "uint16": (0, 0xFFFF),
    "int32": (-0x8000_0000, 0x7FFF_FFFF),
    "uint32": (0, 0xFFFF_FFFF),
    "int64": (-0x8000_0000_0000_0000, 0x7FFF_FFFF_FFFF_FFFF),
    "uint64": (0, 0xFFFF_FFFF_FFFF_FFFF),
}
INTEGER_KINDS = frozenset(INTEGER_RANGES)
FLOAT_KINDS = frozenset({"float32", "float64"})
PRIMITIVE_KINDS = frozenset({"boolean", "char", "wchar"} | INTEGER_KINDS | FLOAT_KINDS)

Value = int | float | str | bool
"""A constant, default or label value. Enum values are the literal's IDL name."""


@dataclass(frozen=True, slots=True)
class PrimitiveType:
    """``kind`` is one of :data:`PRIMITIVE_KINDS` (``short`` is ``int16``, ...)."""

    kind: str


@dataclass(frozen=True, slots=True)
class StringType:
    bound: int | None = None
    wide: bool = False


@dataclass(frozen=True, slots=True)
class SequenceType:
    element: TypeRef
    bound: int | None = None


@dataclass(frozen=True, slots=True)
class ArrayType:
    """``element`` is never itself an ArrayType: ``long a[2][3]`` has ``dims == (2, 3)``."""

    element: TypeRef
    dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NamedType:
    name: str


TypeRef = PrimitiveType | StringType | SequenceType | ArrayType | NamedType


@dataclass(frozen=True, slots=True)
class Member:
    """A struct member. ``default`` is its default value when its type is a primitive,
    string or enum (explicit ``@default`` or the type's zero), else None."""

    name: str
    type: TypeRef
    optional: bool = False
    key: bool = False
    member_id: int | None = None
    default: Value | None = None


@dataclass(frozen=True, slots=True)
class StructType:
    name: str
    members: tuple[Member, ...]
    base: str | None = None
    extensibility: str = "final"
    nested: bool = False
    autoid: str = "sequential"
    keylist: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class UnionCase:
    name: str
    type: TypeRef
    labels: tuple[Value, ...]
    is_default: bool = False
    member_id: int | None = None


# A union's JSON object holds its discriminator under "discriminator", so no member may
# have that name (the generator refuses it; introspection of a class raises TypeError).
UNION_DISCRIMINATOR_MEMBER = (
    "a union member cannot be named 'discriminator': the JSON mapping writes the union's "
    "discriminator under that key; rename the member")


@dataclass(frozen=True, slots=True)
class UnionType:
    name: str
    discriminator: TypeRef
    cases: tuple[UnionCase, ...]
    extensibility: str = "final"
    nested: bool = False
    key_discriminator: bool = False


@dataclass(frozen=True, slots=True)
class EnumType:
    name: str
    literals: tuple[tuple[str, int], ...]
    default_literal: str


@dataclass(frozen=True, slots=True)
class TypedefType:
    name: str
    type: TypeRef


Declared = StructType | UnionType | EnumType | TypedefType


@dataclass(frozen=True, slots=True)
class Constant:
    name: str
    type: TypeRef
    value: Value


@dataclass(slots=True)
class Schema:
    """All declared types and constants, in declaration order."""

    types: dict[str, Declared] = field(default_factory=dict)
    constants: dict[str, Constant] = field(default_factory=dict)
    modules: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    """The source file (as provenance names it) of each type and constant."""

    def __getitem__(self, name: str) -> Declared:
        return self.types[name]

    def resolve(self, ref: TypeRef) -> TypeRef | Declared:
        """``ref`` with typedefs followed: a non-named type, or a struct, union or enum."""
        seen: set[str] = set()
        current: TypeRef | Declared = ref
        while isinstance(current, NamedType | TypedefType):
            if isinstance(current, NamedType):
                if current.name in seen:
                    raise ValueError(f"typedef cycle at {current.name}")
                seen.add(current.name)
                current = self.types[current.name]
            else:
                current = current.type
        return current

    def resolve_named(self, ref: TypeRef) -> TypeRef:
        """``ref`` with typedefs followed, as a reference (a NamedType for a struct, union
        or enum)."""
        resolved = self.resolve(ref)
        if isinstance(resolved, StructType | UnionType | EnumType):
            return NamedType(resolved.name)
        assert not isinstance(resolved, TypedefType)
        return resolved

    def all_members(self, struct: StructType) -> list[Member]:
        """Members of ``struct`` including inherited ones, base members first."""
        chain: list[StructType] = []
        current: StructType | None = struct
        while current is not None:
            chain.append(current)
            base = self.types.get(current.base) if current.base else None
            current = base if isinstance(base, StructType) else None
        return [member for link in reversed(chain) for member in link.members]

    def key_names(self, struct: StructType) -> list[str]:
        """The key members of ``struct`` (``#pragma keylist`` or ``@key``), inherited too."""
        members = self.all_members(struct)
        current: StructType | None = struct
        while current is not None:
            if current.keylist is not None:
                return list(current.keylist)
            base = self.types.get(current.base) if current.base else None
            current = base if isinstance(base, StructType) else None
        return [member.name for member in members if member.key]

    def dependencies(self, name: str) -> Iterator[str]:
        """Names of declared types that ``name`` refers to directly."""
        declared = self.types[name]
        refs: list[TypeRef] = []
        if isinstance(declared, StructType):
            if declared.base:
                yield declared.base
            refs = [member.type for member in declared.members]
        elif isinstance(declared, UnionType):
            refs = [declared.discriminator] + [case.type for case in declared.cases]
        elif isinstance(declared, TypedefType):
            refs = [declared.type]
        for ref in refs:
            yield from named_in(ref)


def zero_value(resolved: TypeRef | Declared) -> Value | None:
    """The IDL default of a primitive, string or enum type; None for other types."""
    if isinstance(resolved, StringType):
        return ""
    if isinstance(resolved, EnumType):
        return resolved.default_literal
    if isinstance(resolved, PrimitiveType):
        if resolved.kind == "boolean":
            return False
        if resolved.kind in ("char", "wchar"):
            return "\x00"
        return 0.0 if resolved.kind in FLOAT_KINDS else 0
    return None


def named_in(ref: TypeRef) -> Iterator[str]:
    """Names of declared types that appear in ``ref``."""
    if isinstance(ref, NamedType):
        yield ref.name
    elif isinstance(ref, SequenceType | ArrayType):
        yield from named_in(ref.element)


def union_default(schema: Schema, union: UnionType) -> tuple[Value, UnionCase | None]:
    """The default of a union: the discriminator's zero value (0, FALSE or the enum's
    default literal) and the case that value selects, if any."""
    resolved = schema.resolve(union.discriminator)
    zero: Value
    if isinstance(resolved, EnumType):
        zero = resolved.default_literal
    elif isinstance(resolved, PrimitiveType) and resolved.kind == "boolean":
        zero = False
    elif isinstance(resolved, PrimitiveType) and resolved.kind == "char":
        zero = "\x00"
    else:
        zero = 0
    for case in union.cases:
        if zero in case.labels:
            return zero, case
    for case in union.cases:
        if case.is_default:
            return zero, case
    return zero, None
