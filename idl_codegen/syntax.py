"""The IDL syntax tree the parser builds: what was written, before any name is resolved."""

from __future__ import annotations

from dataclasses import dataclass, field

from idl_codegen.diagnostics import Location

__all__ = [
    "Annotation",
    "BaseTypeSpec",
    "Binary",
    "Case",
    "ConstDef",
    "Declarator",
    "Definition",
    "EnumDef",
    "Enumerator",
    "Expr",
    "Literal",
    "Member",
    "ModuleDef",
    "NameRef",
    "NamedSpec",
    "Pragma",
    "ScopedName",
    "SequenceSpec",
    "Specification",
    "StringSpec",
    "StructDef",
    "TypeSpec",
    "TypedefDef",
    "Unary",
    "UnionDef",
]


@dataclass(frozen=True, slots=True)
class ScopedName:
    """``a::b::c`` (``absolute`` when written ``::a::b``)."""

    parts: tuple[str, ...]
    absolute: bool
    location: Location

    def __str__(self) -> str:
        return ("::" if self.absolute else "") + "::".join(self.parts)


# -- constant expressions -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    """``kind``: integer, float, string, wstring, char, wchar or boolean."""

    kind: str
    value: object
    location: Location


@dataclass(frozen=True, slots=True)
class NameRef:
    name: ScopedName
    location: Location


@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: Expr
    location: Location


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Expr
    right: Expr
    location: Location


Expr = Literal | NameRef | Unary | Binary


# -- annotations ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Annotation:
    """``@name``, ``@name(expr)`` or ``@name(key=expr, ...)``; positional params have key None."""

    name: str
    params: tuple[tuple[str | None, Expr], ...]
    location: Location


# -- type specs -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BaseTypeSpec:
    """A primitive type as written, normalised: ``long``, ``unsigned long long``, ``int8``..."""

    name: str
    location: Location


@dataclass(frozen=True, slots=True)
class StringSpec:
    bound: Expr | None
    wide: bool
    location: Location


@dataclass(frozen=True, slots=True)
class SequenceSpec:
    element: TypeSpec
    bound: Expr | None
    location: Location


@dataclass(frozen=True, slots=True)
class NamedSpec:
    name: ScopedName
    location: Location


TypeSpec = BaseTypeSpec | StringSpec | SequenceSpec | NamedSpec


@dataclass(frozen=True, slots=True)
class Declarator:
    name: str
    dims: tuple[Expr, ...]
    location: Location


# -- definitions ----------------------------------------------------------------------


@dataclass(slots=True)
class Member:
    type_spec: TypeSpec
    declarators: list[Declarator]
    annotations: list[Annotation]
    location: Location


@dataclass(slots=True)
class StructDef:
    name: str
    base: ScopedName | None
    members: list[Member] | None  # None: a forward declaration
    annotations: list[Annotation]
    location: Location


@dataclass(slots=True)
class Case:
    labels: list[Expr | None]  # None: ``default``
    type_spec: TypeSpec
    declarator: Declarator
    annotations: list[Annotation]
    location: Location
    label_locations: list[Location] = field(default_factory=list)


@dataclass(slots=True)
class UnionDef:
    name: str
    switch_type: TypeSpec | None  # None: a forward declaration
    switch_annotations: list[Annotation]
    cases: list[Case]
    annotations: list[Annotation]
    location: Location


@dataclass(slots=True)
class Enumerator:
    name: str
    annotations: list[Annotation]
    location: Location


@dataclass(slots=True)
class EnumDef:
    name: str
    enumerators: list[Enumerator]
    annotations: list[Annotation]
    location: Location


@dataclass(slots=True)
class TypedefDef:
    type_spec: TypeSpec
    declarators: list[Declarator]
    annotations: list[Annotation]
    location: Location


@dataclass(slots=True)
class ConstDef:
    type_spec: TypeSpec
    name: str
    value: Expr
    annotations: list[Annotation]
    location: Location


@dataclass(slots=True)
class Pragma:
    """A ``#pragma`` line; ``words`` are its whitespace-separated words."""

    words: list[str]
    location: Location


@dataclass(slots=True)
class ModuleDef:
    name: str
    definitions: list[Definition]
    annotations: list[Annotation]
    location: Location


Definition = ModuleDef | StructDef | UnionDef | EnumDef | TypedefDef | ConstDef | Pragma


@dataclass(slots=True)
class Specification:
    definitions: list[Definition] = field(default_factory=list)
