"""What the generated CDR <-> JSON transcoders share (:mod:`idl_codegen.cdr_json`).

- the struct formats of the primitive kinds, and the runtime helpers the generated code
  calls (non-finite floats, characters, base64);
- ``Lines`` (the source being written) and ``Align`` (what is known of the position);
- ``Generator``: one transcoder's namespace and names, and the questions both directions
  ask about types (members, enums, union labels), refusing (``Unsupported``) what the
  direct path does not cover.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from array import array
from json.encoder import encode_basestring
from typing import Any

from idl_codegen.json_values import FLOAT32_MAX
from idl_codegen.model import EnumType, PrimitiveType, Schema, StructType, TypeRef, UnionType

__all__ = [
    "CAUGHT",
    "FLOATS",
    "FORMATS",
    "HEADER",
    "INTEGERS",
    "Align",
    "CdrError",
    "Generator",
    "Lines",
    "Unsupported",
    "is_boolean",
    "product",
]

# struct format, size of each primitive kind
FORMATS: dict[str, tuple[str, int]] = {
    "boolean": ("B", 1), "char": ("B", 1), "octet": ("B", 1), "int8": ("b", 1),
    "uint8": ("B", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
    "uint32": ("I", 4), "int64": ("q", 8), "uint64": ("Q", 8), "float32": ("f", 4),
    "float64": ("d", 8),
}
INTEGERS = frozenset({"octet", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                       "int64", "uint64"})
FLOATS = frozenset({"float32", "float64"})
HEADER = b"\x00\x01\x00\x00"  # CDR_LE, no options


class CdrError(ValueError):
    """The fast path does not handle this sample or value (the general path decides)."""


class Unsupported(Exception):
    """The type is outside what the transcoder covers."""


class _NonFinite(float):
    """A non-finite float whose ``repr`` is the JSON codec's string for it."""

    def __repr__(self) -> str:
        if self != self:
            return '"NaN"'
        return '"Infinity"' if self > 0 else '"-Infinity"'


def _fix(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_NonFinite(v) if type(v) is float and v - v != 0.0 else v for v in values)


_dump = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def _floats(values: list[float]) -> str:
    try:
        return _dump(values)
    except ValueError:
        return "[" + ",".join(repr(_NonFinite(v)) if v - v != 0.0 else repr(v)
                              for v in values) + "]"


def _chr(code: int) -> str:
    if code > 127:
        raise CdrError("char above 127")
    return encode_basestring(chr(code))


def _b64(data: Any) -> str:
    return '"' + base64.b64encode(data).decode("ascii") + '"'


def _unb64(text: Any) -> bytes:
    if type(text) is not str:
        raise CdrError("octets are base64 text here")
    return base64.b64decode(text, validate=True)


_BOOL_TEXT = ("false", "true")
CAUGHT = (KeyError, TypeError, ValueError, IndexError, OverflowError, struct.error,
           UnicodeError, binascii.Error, AttributeError)


class Lines:
    """Indented source lines of one generated function."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1

    def add(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)


class Align:
    """What is known of the position: ``p % modulus == residue`` (modulus 1: nothing)."""

    __slots__ = ("modulus", "residue")

    def __init__(self, modulus: int = 8, residue: int = 0) -> None:
        self.modulus = modulus
        self.residue = residue

    def copy(self) -> Align:
        return Align(self.modulus, self.residue)

    def forget(self) -> None:
        self.modulus, self.residue = 1, 0

    def pad(self, alignment: int) -> int | None:
        """Static padding to reach ``alignment``; None when it is not known."""
        if alignment == 1:
            return 0
        if self.modulus < alignment:
            return None
        return (-self.residue) % alignment

    def advance(self, size: int) -> None:
        self.residue = (self.residue + size) % self.modulus

    def aligned(self, alignment: int) -> None:
        """The position was just aligned to ``alignment``."""
        if self.modulus < alignment:
            self.modulus, self.residue = alignment, 0
        else:
            self.residue = (self.residue + (-self.residue) % alignment) % self.modulus


def product(dims: list[int]) -> int:
    total = 1
    for dim in dims:
        total *= dim
    return total


class Generator:
    """Source of ``to_json`` and ``from_json`` for one root type."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.namespace: dict[str, Any] = {
            "_U32": struct.Struct("<I").unpack_from, "_P32": struct.Struct("<I").pack,
            "_fix": _fix, "_floats": _floats, "_dump": _dump, "_str": encode_basestring,
            "_chr": _chr, "_b64": _b64, "_unb64": _unb64, "_B": _BOOL_TEXT, "_E": CdrError,
            "_array": array, "_F32": FLOAT32_MAX, "_NUM": (int, float), "_utf8": str,
            "_H": HEADER,
        }
        self._counter = 0
        self._active: set[str] = set()

    def name(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def constant(self, prefix: str, value: Any) -> str:
        key = self.name(prefix)
        self.namespace[key] = value
        return key

    # -- questions about types, shared by both directions --------------------------------

    def resolve(self, ref: TypeRef) -> Any:
        return self.schema.resolve(ref)

    def enter(self, name: str) -> None:
        if name in self._active:
            raise Unsupported(f"recursive type {name}")
        self._active.add(name)

    def leave(self, name: str) -> None:
        self._active.discard(name)

    def members(self, struct_type: StructType) -> list[Any]:
        chain: StructType | None = struct_type
        while chain is not None:
            if chain.extensibility != "final":
                raise Unsupported(f"{chain.name} is {chain.extensibility}")
            base = self.schema.types.get(chain.base) if chain.base else None
            chain = base if isinstance(base, StructType) else None
        members = self.schema.all_members(struct_type)
        if any(member.optional for member in members):
            raise Unsupported(f"{struct_type.name} has optional members")
        return members

    def primitive(self, resolved: Any) -> str | None:
        """The primitive kind of a resolved type (enums are not primitives here)."""
        if isinstance(resolved, PrimitiveType):
            if resolved.kind == "wchar":
                raise Unsupported("wchar")
            return resolved.kind
        return None

    def enum_maps(self, enum_type: EnumType) -> tuple[str, str]:
        """Constants: wire value -> JSON text, and literal name -> wire value."""
        by_value = {value: encode_basestring(name) for name, value in enum_type.literals}
        by_name = {name: value for name, value in enum_type.literals}
        return self.constant("_EV", by_value), self.constant("_EN", by_name)

    def union_cases(self, union: UnionType) -> tuple[list[tuple[Any, tuple[Any, ...]]], Any]:
        """((case, wire label values) for cases with labels, the default case or None)."""
        if union.extensibility != "final":
            raise Unsupported(f"{union.name} is {union.extensibility}")
        discriminator = self.resolve(union.discriminator)
        labelled: list[tuple[Any, tuple[Any, ...]]] = []
        default = None
        for case in union.cases:
            labels: list[Any] = []
            for label in case.labels:
                if isinstance(discriminator, EnumType):
                    labels.append(dict(discriminator.literals)[str(label)])
                else:
                    labels.append(int(label))  # booleans are 0 / 1 on the wire
            if labels:
                labelled.append((case, tuple(labels)))
            if case.is_default:
                default = case
        return labelled, default

    def discriminator(self, union: UnionType) -> tuple[str, int, Any]:
        """(struct code, size, enum type or None) of a union's discriminator."""
        resolved = self.resolve(union.discriminator)
        if isinstance(resolved, EnumType):
            return "I", 4, resolved
        kind = self.primitive(resolved)
        if kind in INTEGERS or kind == "boolean":
            assert kind is not None
            code, size = FORMATS[kind]
            return code, size, None
        raise Unsupported(f"discriminator of {union.name}")


def is_boolean(gen: Generator, union: UnionType) -> bool:
    resolved = gen.resolve(union.discriminator)
    return isinstance(resolved, PrimitiveType) and resolved.kind == "boolean"
