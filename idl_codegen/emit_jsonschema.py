"""JSON Schema (2020-12) of the JSON form of IDL types (see :mod:`idl_codegen.json_codec`).

One document per named type: its root is a ``$ref`` into ``$defs``, which holds the
type and every type it uses under their fully qualified IDL names, so recursive types
work. Structs are closed objects (``additionalProperties: false``) whose non-optional
members are required; unions are a ``oneOf`` of one object per case. The schema
describes the canonical form the codec writes; the codec also accepts a list of numbers
for octets and a union without its discriminator when the member implies it, and it
counts string bounds in UTF-8 bytes where ``maxLength`` counts characters.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

from idl_codegen.model import (
    INTEGER_RANGES,
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
    UnionType,
    Value,
    named_in,
)
from idl_codegen.provenance import provenance

__all__ = ["DIALECT", "ENUM_MAX", "emit_jsonschema", "json_schema", "schema_file_name"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
_NON_FINITE = ["NaN", "Infinity", "-Infinity"]
ENUM_MAX = 2**32 - 1  # enums are 32-bit unsigned on the wire (cyclonedds-python)


def schema_file_name(name: str) -> str:
    """``a::b::T`` -> ``a.b.T.schema.json``."""
    return name.replace("::", ".") + ".schema.json"


def emit_jsonschema(schema: Schema, directory: str = "json-schema") -> dict[str, str]:
    """One schema file per named type, as ``{relative posix path: content}``."""
    out: dict[str, str] = {}
    for name in schema.types:
        document = json_schema(schema, name, provenance([schema.origins.get(name, "")] if
                                                          schema.origins.get(name) else []))
        out[f"{directory}/{schema_file_name(name)}"] = json.dumps(
            document, indent=2, ensure_ascii=False) + "\n"
    return dict(sorted(out.items()))


def json_schema(schema: Schema, name: str, comment: str | None = None) -> dict[str, Any]:
    """The standalone JSON Schema document of type ``name``."""
    document: dict[str, Any] = {"$schema": DIALECT, "title": name}
    if comment:
        document["$comment"] = comment
    document["$ref"] = _ref(name)
    definitions: dict[str, Any] = {}
    pending = [name]
    while pending:
        current = pending.pop()
        if current in definitions:
            continue
        definitions[current] = _Builder(schema).definition(current)
        pending += [dep for dep in _uses(schema, current) if dep not in definitions]
    document["$defs"] = dict(sorted(definitions.items()))
    return document


def _ref(name: str) -> str:
    return f"#/$defs/{name}"


def _uses(schema: Schema, name: str) -> list[str]:
    declared = schema.types[name]
    found: list[str] = []
    if isinstance(declared, StructType):
        for member in schema.all_members(declared):
            found += named_in(member.type)
    elif isinstance(declared, UnionType):
        found += named_in(declared.discriminator)
        for case in declared.cases:
            found += named_in(case.type)
    elif isinstance(declared, TypedefType):
        found += named_in(declared.type)
    return found


class _Builder:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def definition(self, name: str) -> dict[str, Any]:
        declared = self.schema.types[name]
        if isinstance(declared, StructType):
            return self._struct(declared)
        if isinstance(declared, UnionType):
            return self._union(declared)
        if isinstance(declared, EnumType):
            return {"type": "string", "enum": [literal for literal, _ in declared.literals]}
        return self.type(declared.type)

    def type(self, ref: TypeRef) -> dict[str, Any]:
        if isinstance(ref, NamedType):
            return {"$ref": _ref(ref.name)}
        if isinstance(ref, PrimitiveType):
            return _primitive(ref.kind)
        if isinstance(ref, StringType):
            out: dict[str, Any] = {"type": "string"}
            if ref.bound is not None:
                out["maxLength"] = ref.bound
            return out
        if isinstance(ref, SequenceType):
            if self._is_octet(ref.element):
                return _base64(None if ref.bound is None else _b64_length(ref.bound), None,
                               _B64_ANY)
            seq: dict[str, Any] = {"type": "array", "items": self.type(ref.element)}
            if ref.bound is not None:
                seq["maxItems"] = ref.bound
            return seq
        dims = list(ref.dims)
        if self._is_octet(ref.element):
            octets = dims.pop()
            length = _b64_length(octets)
            inner = _base64(length, length, _b64_exact(octets))
        else:
            inner = self.type(ref.element)
        for dim in reversed(dims):
            inner = {"type": "array", "items": inner, "minItems": dim, "maxItems": dim}
        return inner

    def _is_octet(self, ref: TypeRef) -> bool:
        resolved = self.schema.resolve(ref)
        return isinstance(resolved, PrimitiveType) and resolved.kind == "octet"

    def _member(self, member: Member) -> dict[str, Any]:
        out = self.type(member.type)
        if member.default is not None:
            out = {**out, "default": self._json_value(member.default, member.type)}
        if member.optional:
            return {"anyOf": [out, {"type": "null"}]}
        return out

    def _json_value(self, value: Value, ref: TypeRef) -> Any:
        resolved = self.schema.resolve(ref)
        if isinstance(value, float) and not math.isfinite(value):
            return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        if isinstance(resolved, PrimitiveType) and resolved.kind in ("float32", "float64"):
            return float(value)
        return value

    def _struct(self, struct_type: StructType) -> dict[str, Any]:
        members = self.schema.all_members(struct_type)
        return {
            "type": "object",
            "properties": {member.name: self._member(member) for member in members},
            "required": [member.name for member in members if not member.optional],
            "additionalProperties": False,
        }

    def _union(self, union: UnionType) -> dict[str, Any]:
        discriminator = self.type(union.discriminator)
        all_labels: list[Any] = []
        variants: list[dict[str, Any]] = []
        default_member = None
        for case in union.cases:
            labels = [self._json_value(label, union.discriminator) for label in case.labels]
            all_labels += labels
            if case.is_default:
                default_member = case
                continue
            selector: dict[str, Any] = {"const": labels[0]} if len(labels) == 1 \
                else {"enum": labels}
            variants.append(_variant(selector, case.name, self.type(case.type)))
        uncovered: dict[str, Any] = {"allOf": [discriminator, {"not": {"enum": all_labels}}]} \
            if all_labels else discriminator
        resolved = self.schema.resolve(union.discriminator)
        if isinstance(resolved, EnumType):
            # a value no literal has is written as the integer; it selects the default
            # member, or none
            outside = {"type": "integer", "minimum": 0, "maximum": ENUM_MAX,
                       "not": {"enum": [value for _, value in resolved.literals]}}
            covered = _all_covered(self.schema, union, len(all_labels))
            uncovered = outside if covered else {"anyOf": [uncovered, outside]}
        if default_member is not None:
            variants.append(_variant(uncovered, default_member.name,
                                     self.type(default_member.type)))
        elif isinstance(resolved, EnumType) or not _all_covered(self.schema, union,
                                                                len(all_labels)):
            variants.append(_variant(uncovered, None, None))
        return {"type": "object", "oneOf": variants}


def _variant(selector: dict[str, Any], member: str | None, schema: dict[str, Any] | None
             ) -> dict[str, Any]:
    properties: dict[str, Any] = {"discriminator": selector}
    required = ["discriminator"]
    if member is not None and schema is not None:
        properties[member] = schema
        required.append(member)
    return {"properties": properties, "required": required, "additionalProperties": False}


def _all_covered(schema: Schema, union: UnionType, count: int) -> bool:
    resolved = schema.resolve(union.discriminator)
    if isinstance(resolved, EnumType):
        return count >= len(resolved.literals)
    if isinstance(resolved, PrimitiveType) and resolved.kind == "boolean":
        return count >= 2
    return False


def _b64_length(octets: int) -> int:
    return 4 * ((octets + 2) // 3)


_B64 = "[A-Za-z0-9+/]"
# padded base64 of any length, as the codec (base64.b64decode(validate=True)) reads it
_B64_ANY = f"^(?:{_B64}{{4}})*(?:{_B64}{{2}}==|{_B64}{{3}}=)?$"


def _b64_exact(octets: int) -> str:
    """The pattern of the base64 text of exactly ``octets`` bytes (length and padding)."""
    tail = ("", f"{_B64}{{2}}==", f"{_B64}{{3}}=")[octets % 3]
    return f"^(?:{_B64}{{4}}){{{octets // 3}}}{tail}$"


def _base64(max_length: int | None, min_length: int | None, pattern: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string", "contentEncoding": "base64", "pattern": pattern}
    if min_length is not None:
        out["minLength"] = min_length
    if max_length is not None:
        out["maxLength"] = max_length
    return out


def _primitive(kind: str) -> dict[str, Any]:
    if kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]
        return {"type": "integer", "minimum": low, "maximum": high}
    if kind == "float32":
        return {"anyOf": [{"type": "number", "minimum": -_FLOAT32_MAX, "maximum": _FLOAT32_MAX},
                          {"enum": _NON_FINITE}]}
    if kind == "float64":
        return {"anyOf": [{"type": "number"}, {"enum": _NON_FINITE}]}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "char":
        return {"type": "string", "pattern": "^[\\u0000-\\u007f]$"}
    return {"type": "string", "pattern": "^[\\u0000-\\u7fff]$"}  # wchar: code below 32768
