"""The JSON codec: instances of cyclonedds types <-> JSON-compatible values.

Driven by the type description (:mod:`idl_codegen.model`), which
:func:`~idl_codegen.introspect.describe` reads from any cyclonedds class, so one codec
serves generated packages, loaded schemas and run-time discovered types.

Mapping (both directions validate; an error names the member path, ``$.a.b[2]``):

- struct: an object with the IDL member names, base members first; an ``@optional``
  member is ``null`` when absent (and may be left out on input);
- integers: numbers, range-checked (``bool`` is not an integer); ``octet`` 0..255;
- ``float`` / ``double``: numbers; ``NaN``, ``Infinity`` and ``-Infinity`` as strings;
  ``float`` is checked against the float32 range;
- ``boolean``: ``true`` / ``false``; ``char``: a one-character ASCII string;
  ``wchar``: a one-character string;
- strings: JSON strings; a bound counts UTF-8 bytes; NUL characters are refused;
- enums: the literal's name;
- sequences and arrays: arrays (length checked; an array of arrays per dimension);
  a sequence or array of ``octet`` is one base64 string (arrays of arrays of octet:
  base64 strings at the innermost dimension);
- unions: ``{"discriminator": d, "<member>": value}``; the member is left out when the
  discriminator selects none. On input ``discriminator`` may be left out when the one
  member present implies it. An enum discriminator holding a value no literal has (the
  default member, as cyclonedds writes it, or a peer's value) is that integer.

``strict=False`` on input fills missing members with their defaults and ignores unknown
members.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from typing import Any

from idl_codegen.emit_jsonschema import ENUM_MAX, json_schema
from idl_codegen.introspect import Described, describe
from idl_codegen.json_values import (
    Decode,
    Encode,
    IdlValueError,
    each,
    each_decode,
    fixed_list,
    octets,
    primitive,
    show,
    string,
)
from idl_codegen.model import (
    INTEGER_RANGES,
    ArrayType,
    EnumType,
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
    zero_value,
)

__all__ = ["IdlValueError", "TypeCodec", "codec_for"]


_TOO_DEEP = "nested too deeply (Python's recursion limit)"


class TypeCodec:
    """Converts one cyclonedds type to and from JSON-compatible values."""

    def __init__(self, described: Described) -> None:
        self.type_name = described.root
        self.schema: Schema = described.schema
        self.python_type: type = described.classes[described.root]
        compiler = _Compiler(described)
        self._encode, self._decode = compiler.pair(NamedType(described.root))

    def to_json(self, sample: Any) -> Any:
        """``sample`` as JSON-compatible Python values (dict, list, str, int, float, ...)."""
        try:
            return self._encode(sample)
        except RecursionError:
            raise IdlValueError(_TOO_DEEP) from None

    def from_json(self, value: Any, *, strict: bool = True) -> Any:
        """An instance of :attr:`python_type` from JSON-compatible ``value``."""
        try:
            return self._decode(value, strict)
        except RecursionError:
            raise IdlValueError(_TOO_DEEP) from None

    def dumps(self, sample: Any) -> bytes:
        """Compact UTF-8 JSON of ``sample``."""
        value = self.to_json(sample)
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except RecursionError:
            raise IdlValueError(_TOO_DEEP) from None
        return text.encode("utf-8")

    def loads(self, data: bytes | str, *, strict: bool = True) -> Any:
        """An instance of :attr:`python_type` from JSON text."""
        try:
            value = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise IdlValueError(f"not valid JSON: {exc}") from exc
        except RecursionError:
            # json's parser recurses per nesting level: 100 kB of '[' exhausts the stack
            raise IdlValueError("not valid JSON: nested too deeply") from None
        return self.from_json(value, strict=strict)

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema (2020-12) of this type's JSON form."""
        return json_schema(self.schema, self.type_name)


_CACHE: dict[type, TypeCodec] = {}
_CACHE_LOCK = threading.Lock()


def codec_for(cls: type) -> TypeCodec:
    """The (cached) codec of a cyclonedds ``IdlStruct``, ``IdlUnion`` or ``IdlEnum`` class."""
    codec = _CACHE.get(cls)
    if codec is None:
        codec = TypeCodec(describe(cls))
        with _CACHE_LOCK:
            codec = _CACHE.setdefault(cls, codec)
    return codec


class _Compiler:
    """Builds one (encode, decode) pair of closures per type, shared by all uses."""

    def __init__(self, described: Described) -> None:
        self.schema = described.schema
        self.classes = described.classes
        self.attributes = described.attributes
        self._named: dict[str, tuple[Encode, Decode]] = {}

    def pair(self, ref: TypeRef) -> tuple[Encode, Decode]:
        if isinstance(ref, PrimitiveType):
            return primitive(ref.kind)
        if isinstance(ref, StringType):
            return string(ref.bound)
        if isinstance(ref, SequenceType):
            return self._sequence(ref)
        if isinstance(ref, ArrayType):
            return self._array(ref.element, list(ref.dims))
        return self._named_pair(ref.name)

    def _named_pair(self, name: str) -> tuple[Encode, Decode]:
        if name in self._named:
            return self._named[name]
        # recursion: late-bound forwarders until the real pair exists
        slot: list[tuple[Encode, Decode]] = []
        self._named[name] = (lambda v: slot[0][0](v), lambda v, s: slot[0][1](v, s))
        declared = self.schema.types[name]
        if isinstance(declared, TypedefType):
            built = self.pair(declared.type)
        elif isinstance(declared, EnumType):
            built = self._enum(declared)
        elif isinstance(declared, StructType):
            built = self._struct(declared)
        else:
            assert isinstance(declared, UnionType)
            built = self._union(declared)
        slot.append(built)
        self._named[name] = built
        return built

    # -- collections -------------------------------------------------------------------

    def _is_octet(self, ref: TypeRef) -> bool:
        resolved = self.schema.resolve(ref)
        return isinstance(resolved, PrimitiveType) and resolved.kind == "octet"

    def _is_byte_array_element(self, ref: TypeRef) -> bool:
        resolved = self.schema.resolve(ref)
        return isinstance(resolved, PrimitiveType) and resolved.kind in ("octet", "uint8")

    def _sequence(self, ref: SequenceType) -> tuple[Encode, Decode]:
        bound = ref.bound
        if self._is_octet(ref.element):
            return octets(bound, exact=None, as_bytes=False)
        element_encode, element_decode = self.pair(ref.element)

        def encode(value: Any) -> Any:
            if not isinstance(value, list | tuple):
                raise IdlValueError(f"expected a sequence, got {show(value)}")
            if bound is not None and len(value) > bound:
                raise IdlValueError(f"sequence of {len(value)} exceeds the bound {bound}")
            return each(value, element_encode)

        def decode(value: Any, strict: bool) -> Any:
            if not isinstance(value, list):
                raise IdlValueError(f"expected an array, got {show(value)}")
            if bound is not None and len(value) > bound:
                raise IdlValueError(f"array of {len(value)} exceeds the bound {bound}")
            return each_decode(value, element_decode, strict)

        return encode, decode

    def _array(self, element: TypeRef, dims: list[int]) -> tuple[Encode, Decode]:
        size = dims[0]
        if len(dims) == 1 and self._is_byte_array_element(element):
            if self._is_octet(element):
                return octets(size, exact=size, as_bytes=True)
            inner_encode, inner_decode = primitive("uint8")
            list_encode, list_decode = fixed_list(size, inner_encode, inner_decode)
            return list_encode, lambda value, strict: bytes(list_decode(value, strict))
        if len(dims) == 1:
            inner_encode, inner_decode = self.pair(element)
        else:
            inner_encode, inner_decode = self._array(element, dims[1:])
        return fixed_list(size, inner_encode, inner_decode)

    # -- enum --------------------------------------------------------------------------

    def _enum(self, enum_type: EnumType) -> tuple[Encode, Decode]:
        cls: Any = self.classes[enum_type.name]
        attributes = self.attributes[enum_type.name]
        by_name = {literal: cls[attributes[literal]] for literal, _ in enum_type.literals}
        by_member = {member: literal for literal, member in by_name.items()}
        by_value = {member.value: literal for literal, member in by_name.items()}
        names = ", ".join(literal for literal, _ in enum_type.literals)

        def encode(value: Any) -> Any:
            literal = by_member.get(value)
            if literal is None:
                literal = by_value.get(value) if type(value) is int else None
                if literal is None:
                    raise IdlValueError(f"{show(value)} is not a literal of enum "
                                        f"{enum_type.name} ({names})")
            return literal

        def decode(value: Any, strict: bool) -> Any:
            member = by_name.get(value) if isinstance(value, str) else None
            if member is None:
                raise IdlValueError(f"expected one of {names}, got {show(value)}")
            return member

        return encode, decode

    # -- struct ------------------------------------------------------------------------

    def _struct(self, struct_type: StructType) -> tuple[Encode, Decode]:
        cls = self.classes[struct_type.name]
        attributes = self.attributes[struct_type.name]
        members = self.schema.all_members(struct_type)
        plan: list[tuple[str, str, bool, Encode, Decode]] = []
        for member in members:
            encode_one, decode_one = self.pair(member.type)
            plan.append((member.name, attributes[member.name], member.optional,
                         encode_one, decode_one))
        known = {name for name, *_ in plan}

        def encode(value: Any) -> Any:
            if not isinstance(value, cls):
                raise IdlValueError(f"expected {struct_type.name}, got {show(value)}")
            out: dict[str, Any] = {}
            for name, attribute, optional, encode_one, _ in plan:
                item = getattr(value, attribute)
                if optional and item is None:
                    out[name] = None
                    continue
                try:
                    out[name] = encode_one(item)
                except IdlValueError as error:
                    raise error.within("." + name) from None
            return out

        def decode(value: Any, strict: bool) -> Any:
            if not isinstance(value, dict):
                raise IdlValueError(f"expected an object for {struct_type.name}, "
                                    f"got {show(value)}")
            if strict and not value.keys() <= known:
                unknown = next(key for key in value if key not in known)
                raise IdlValueError(f"unknown member '{unknown}' of {struct_type.name}")
            kwargs: dict[str, Any] = {}
            for name, attribute, optional, _, decode_one in plan:
                if name in value:
                    item = value[name]
                    if optional and item is None:
                        kwargs[attribute] = None
                        continue
                    try:
                        kwargs[attribute] = decode_one(item, strict)
                    except IdlValueError as error:
                        raise error.within("." + name) from None
                elif optional:
                    kwargs[attribute] = None
                elif strict:
                    raise IdlValueError(f"missing member '{name}'")
            return cls(**kwargs)

        return encode, decode

    # -- union -------------------------------------------------------------------------

    def _union(self, union_type: UnionType) -> tuple[Encode, Decode]:
        cls: Any = self.classes[union_type.name]
        discriminator = self.schema.resolve(union_type.discriminator)
        disc_encode, disc_decode = self.pair(union_type.discriminator)
        python_label = self._python_label_converter(discriminator)
        by_label: dict[Any, UnionCase] = {}
        for case in union_type.cases:
            for label in case.labels:
                by_label[python_label(label)] = case
        default_case = next((case for case in union_type.cases if case.is_default), None)
        by_member = {case.name: case for case in union_type.cases}
        pairs = {case.name: self.pair(case.type) for case in union_type.cases}
        implied: dict[str, Any] = {}
        for case in union_type.cases:
            if case.labels:
                implied[case.name] = python_label(case.labels[0])
        if default_case is not None:
            if isinstance(discriminator, EnumType):
                enum_cls: Any = self.classes[discriminator.name]
                free = next((m for m in enum_cls if m not in by_label), None)
            else:
                free = _free_label(discriminator, {*by_label})
            if free is not None:
                implied[default_case.name] = free
        fallback = getattr(cls, "__idl_default_discriminator__", None)
        # an enum discriminator may hold a value no literal has (cyclonedds writes one for
        # the default member; a peer may send one): JSON gives it as the integer
        by_enum_value: dict[int, Any] = {}
        if isinstance(discriminator, EnumType):
            enum_members: Any = self.classes[discriminator.name]
            by_enum_value = {member.value: member for member in enum_members}
        enum_names = ", ".join(literal for literal, _ in discriminator.literals) \
            if isinstance(discriminator, EnumType) else ""

        def outside(disc: Any) -> int | None:
            """``disc`` when it is an integer outside the enum's literals, else None."""
            if not by_enum_value or type(disc) is not int:
                return None
            if disc in by_enum_value:
                return None
            if not 0 <= disc <= ENUM_MAX:
                raise IdlValueError(f"{disc} is out of range for an enum (0..{ENUM_MAX})")
            return disc

        def selected(disc: Any) -> UnionCase | None:
            return by_label.get(disc, default_case)

        def encode(value: Any) -> Any:
            if not isinstance(value, cls):
                raise IdlValueError(f"expected {union_type.name}, got {show(value)}")
            disc = value.discriminator
            item = value.value
            if disc is None:  # built from the default member: what cyclonedds sends
                disc = implied.get(default_case.name) if default_case else fallback
            if type(disc) is int and disc in by_enum_value:
                disc = by_enum_value[disc]
            try:
                number = outside(disc)
                out: dict[str, Any] = {
                    "discriminator": disc_encode(disc) if number is None else number}
            except IdlValueError as error:
                raise error.within(".discriminator") from None
            case = selected(disc)
            if case is not None:
                try:
                    out[case.name] = pairs[case.name][0](item)
                except IdlValueError as error:
                    raise error.within("." + case.name) from None
            return out

        def decode(value: Any, strict: bool) -> Any:
            if not isinstance(value, dict):
                raise IdlValueError(f"expected an object for {union_type.name}, "
                                    f"got {show(value)}")
            present = [key for key in value if key != "discriminator"]
            if strict or len(present) > 1:
                for key in present:
                    if key not in by_member:
                        raise IdlValueError(f"unknown member '{key}' of {union_type.name}")
                if len(present) > 1:
                    raise IdlValueError(f"a union holds one member, got {', '.join(present)}")
            present = [key for key in present if key in by_member]
            if "discriminator" in value:
                raw = value["discriminator"]
                try:
                    if type(raw) is int and by_enum_value:
                        if raw in by_enum_value:
                            raise IdlValueError(f"expected one of {enum_names}, got {raw} "
                                                "(an integer only for a value no literal has)")
                        disc = outside(raw)
                    else:
                        disc = disc_decode(raw, strict)
                except IdlValueError as error:
                    raise error.within(".discriminator") from None
                case = selected(disc)
                if present and (case is None or present[0] != case.name):
                    selects = f"selects '{case.name}'" if case else "selects no member"
                    raise IdlValueError(f"member '{present[0]}' does not match discriminator "
                                        f"{show(value['discriminator'])}, which {selects}")
            elif present:
                case = by_member[present[0]]
                if case.name not in implied:
                    raise IdlValueError(f"member '{case.name}' needs an explicit discriminator")
                disc = implied[case.name]
            else:
                raise IdlValueError(f"expected 'discriminator' or a member of {union_type.name}")
            if case is None:
                return cls(discriminator=disc, value=None)
            if case.name not in value:
                if strict:
                    raise IdlValueError(f"missing member '{case.name}' for the discriminator")
                zero = self._zero_json(case.type)
                return cls(discriminator=disc, value=pairs[case.name][1](zero, False))
            try:
                item = pairs[case.name][1](value[case.name], strict)
            except IdlValueError as error:
                raise error.within("." + case.name) from None
            return cls(discriminator=disc, value=item)

        return encode, decode

    def _python_label_converter(self, discriminator: object) -> Callable[[Value], Any]:
        if isinstance(discriminator, EnumType):
            cls: Any = self.classes[discriminator.name]
            attributes = self.attributes[discriminator.name]
            return lambda label: cls[attributes[str(label)]]
        return lambda label: label

    def _zero_json(self, ref: TypeRef) -> Any:
        """The JSON form of a type's zero value (for members non-strict input left out)."""
        resolved = self.schema.resolve(ref)
        if isinstance(resolved, StructType):
            return {}
        if isinstance(resolved, UnionType):
            return {"discriminator": self._zero_json(resolved.discriminator)}
        if isinstance(resolved, SequenceType):
            return "" if self._is_octet(resolved.element) else []
        if isinstance(resolved, ArrayType):
            inner: Any = self._zero_json(resolved.element)
            dims = list(resolved.dims)
            if self._is_octet(resolved.element):
                inner = base64.b64encode(bytes(dims.pop())).decode("ascii")
            for dim in reversed(dims):
                inner = [inner] * dim
            return inner
        zero = zero_value(resolved)
        if isinstance(resolved, PrimitiveType) and resolved.kind in INTEGER_RANGES:
            return 0
        return zero


def _free_label(discriminator: object, used: set[Any]) -> Any:
    """A discriminator value no case label uses (for the default member), or None."""
    if isinstance(discriminator, PrimitiveType):
        if discriminator.kind == "boolean":
            return next((v for v in (False, True) if v not in used), None)
        if discriminator.kind == "char":
            return next((chr(c) for c in range(128) if chr(c) not in used), None)
        low, high = INTEGER_RANGES.get(discriminator.kind, (0, 0))
        candidate = 0 if low == 0 else -1
        step = 1 if low == 0 else -1
        while candidate in used and low <= candidate + step <= high:
            candidate += step
        return candidate if candidate not in used else None
    return None
