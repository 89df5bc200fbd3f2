"""Direct CDR <-> JSON transcoding, generated per type: no sample objects in between.

cyclonedds-python (de)serializes in Python, one member at a time (about 30 µs for a
four-member struct); a DDS <-> MQTT bridge then converts the sample to JSON on top. For
the types it covers, :func:`transcoder_for` generates two straight-line functions from
the type description (:mod:`idl_codegen.model`) instead:

- ``to_json(data)``: serialized sample (with its 4-byte encapsulation header) -> compact
  UTF-8 JSON text, exactly the bytes :meth:`TypeCodec.dumps` writes for that sample;
- ``from_json(value)``: JSON-compatible value -> serialized sample, exactly the bytes
  cyclonedds' ``serialize()`` writes for :meth:`TypeCodec.from_json` of that value.

Runs of fixed-size members become one ``struct`` call each; arrays and sequences of
numbers go through ``memoryview.cast`` / ``array``. Both functions raise
:class:`CdrError` for anything they do not handle, and their callers then take the
general path (cyclonedds and the JSON codec), which either succeeds or names the problem
with its member path. So the fast path never has to explain an error, and it must
never accept what the general path would refuse: every member is type- and
range-checked as strictly as ``from_json(strict=True)`` checks it.

Covered: XCDR1 little endian (encapsulation ``CDR_LE``, what Cyclone DDS writes for
``@final`` types, and what ROS 2 uses) of types whose structs and unions are all
``@final``, without ``@optional`` members, ``wchar`` or recursion. Everything else
(``@appendable`` and ``@mutable`` types, XCDR2, big-endian writers) returns None from
:func:`transcoder_for` or raises :class:`CdrError` per sample, and takes the general
path.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring
from typing import Any

from idl_codegen.json_values import FLOAT32_MAX
from idl_codegen.model import (
    ArrayType,
    EnumType,
    NamedType,
    PrimitiveType,
    Schema,
    SequenceType,
    StringType,
    StructType,
    TypeRef,
    UnionType,
)

__all__ = ["CdrError", "Transcoder", "transcoder_for"]

# struct format, size of each primitive kind
_FORMATS: dict[str, tuple[str, int]] = {
    "boolean": ("B", 1), "char": ("B", 1), "octet": ("B", 1), "int8": ("b", 1),
    "uint8": ("B", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
    "uint32": ("I", 4), "int64": ("q", 8), "uint64": ("Q", 8), "float32": ("f", 4),
    "float64": ("d", 8),
}
_INTEGERS = frozenset({"octet", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                       "int64", "uint64"})
_FLOATS = frozenset({"float32", "float64"})
_HEADER = b"\x00\x01\x00\x00"  # CDR_LE, no options


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
_CAUGHT = (KeyError, TypeError, ValueError, IndexError, OverflowError, struct.error,
           UnicodeError, binascii.Error, AttributeError)


class Transcoder:
    """The generated ``to_json`` / ``from_json`` pair of one type."""

    __slots__ = ("_from_json", "_to_json", "source", "type_name")

    def __init__(self, type_name: str, source: str, namespace: dict[str, Any]) -> None:
        self.type_name = type_name
        self.source = source
        exec(compile(source, f"<cdr_json {type_name}>", "exec"), namespace)
        self._to_json: Callable[[Any], Any] = namespace["to_json"]
        self._from_json: Callable[[Any], bytes] = namespace["from_json"]

    def to_json(self, data: bytes | bytearray | memoryview) -> Any:
        """Serialized sample -> compact JSON (and the values of the requested fields);
        :class:`CdrError` when not handled here."""
        try:
            return self._to_json(data)
        except CdrError:
            raise
        except _CAUGHT as exc:
            raise CdrError(f"{type(exc).__name__}: {exc}") from None

    def from_json(self, value: Any) -> bytes:
        """JSON value -> serialized sample; :class:`CdrError` when not handled here."""
        try:
            return self._from_json(value)
        except CdrError:
            raise
        except _CAUGHT as exc:
            raise CdrError(f"{type(exc).__name__}: {exc}") from None


def transcoder_for(schema: Schema, root: str, fields: Sequence[str] = ()) -> Transcoder | None:
    """The transcoder of struct or union ``root`` of ``schema``; None when the type is
    outside what it covers (see the module's docstring).

    With ``fields`` (member paths through structs: ``vin``, ``pose.position.x``), its
    ``to_json`` returns ``(json, values)``: the JSON text and the JSON values of those
    members (enum literals by name), for topic templates. None when one of them is not
    a single value reached through structs alone."""
    if sys.byteorder != "little":
        return None
    try:
        generator = _Generator(schema)
        source = generator.module(root, tuple(fields))
    except Unsupported:
        return None
    return Transcoder(root, source, generator.namespace)


class _Lines:
    """Indented source lines of one generated function."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1

    def add(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)


class _Align:
    """What is known of the position: ``p % modulus == residue`` (modulus 1: nothing)."""

    __slots__ = ("modulus", "residue")

    def __init__(self, modulus: int = 8, residue: int = 0) -> None:
        self.modulus = modulus
        self.residue = residue

    def copy(self) -> _Align:
        return _Align(self.modulus, self.residue)

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


# Tokens of a fixed-size value, for the decoder: literal JSON text, or a slot of one
# struct item (format, alignment, the kinds of the values it unpacks, its JSON template
# with "\x00" standing for each value, and the member path of a single value).
Lit = tuple[str, str]
Slot = tuple[str, str, int, tuple[Any, ...], str, str | None]
Token = Lit | Slot
_MAX_SLOTS = 512


def _lit(text: str) -> Lit:
    return ("lit", text)


def _product(dims: list[int]) -> int:
    total = 1
    for dim in dims:
        total *= dim
    return total


def _nest_text(dims: list[int], one: str) -> str:
    """A JSON array template of ``dims`` with ``one`` per element."""
    if not dims:
        return one
    inner = _nest_text(dims[1:], one)
    return "[" + ",".join([inner] * dims[0]) + "]"


def _nest_tokens(dims: list[int], element: Callable[[], list[Token]]) -> list[Token]:
    if not dims:
        return element()
    out: list[Token] = [_lit("[")]
    for index in range(dims[0]):
        if index:
            out.append(_lit(","))
        out.extend(_nest_tokens(dims[1:], element))
    out.append(_lit("]"))
    return out


class _Generator:
    """Source of ``to_json`` and ``from_json`` for one root type."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.namespace: dict[str, Any] = {
            "_U32": struct.Struct("<I").unpack_from, "_P32": struct.Struct("<I").pack,
            "_fix": _fix, "_floats": _floats, "_dump": _dump, "_str": encode_basestring,
            "_chr": _chr, "_b64": _b64, "_unb64": _unb64, "_B": _BOOL_TEXT, "_E": CdrError,
            "_array": array, "_F32": FLOAT32_MAX, "_NUM": (int, float), "_utf8": str,
            "_H": _HEADER,
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

    def module(self, root: str, fields: Sequence[str] = ()) -> str:
        declared = self.schema.types.get(root)
        if not isinstance(declared, StructType | UnionType):
            raise Unsupported(root)
        decode = _Lines()
        for line in ("mv = memoryview(data)", "if len(mv) < 4 or mv[0] != 0 or mv[1] != 1:",
                     "    raise _E('not CDR_LE')", "mv = mv[4:]", "L = len(mv)", "p = 0"):
            decode.add(line)
        wanted = {path: f"f{index}" for index, path in enumerate(fields)}
        decoder = _Decoder(self, decode, wanted)
        text = decoder.value(NamedType(root), _Align(), "")
        missing = set(wanted) - decoder.assigned
        if missing:
            raise Unsupported(f"members {sorted(missing)} cannot be extracted")
        decode.add("if p > L:")
        decode.add("    raise _E('short sample')")
        if fields:
            decode.add(f"return ({text}).encode(), ({''.join(v + ', ' for v in wanted.values())})")
        else:
            decode.add(f"return ({text}).encode()")
        encode = _Lines()
        encode.add("o = bytearray(_H)")
        encoder = _Encoder(self, encode)
        align = _Align()
        encoder.value(NamedType(root), "value", align)
        encoder.flush(align)
        encode.add("return bytes(o)")
        return "\n".join(["def to_json(data):", *decode.lines, "",
                          "def from_json(value):", *encode.lines, ""])

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
        if kind in _INTEGERS or kind == "boolean":
            assert kind is not None
            code, size = _FORMATS[kind]
            return code, size, None
        raise Unsupported(f"discriminator of {union.name}")


class _Decoder:
    """Emits statements reading CDR at ``p``; returns expressions of JSON text."""

    def __init__(self, gen: _Generator, out: _Lines, wanted: dict[str, str] | None = None
                 ) -> None:
        self.gen = gen
        self.out = out
        self.wanted = wanted or {}  # member path -> variable holding its JSON value
        self.assigned: set[str] = set()

    def value(self, ref: TypeRef, align: _Align, path: str | None = None) -> str:
        tokens = self.tokens(ref, path)
        if tokens is not None:
            return self.emit(tokens, align)
        return self.variable(ref, align, path)

    @staticmethod
    def _member(path: str | None, name: str) -> str | None:
        if path is None:
            return None
        return f"{path}.{name}" if path else name

    # -- fixed-size values: tokens, unpacked in runs ----------------------------------------

    def tokens(self, ref: TypeRef, path: str | None = None) -> list[Token] | None:
        """The tokens of a fixed-size value; None when its size varies."""
        gen = self.gen
        resolved = gen.resolve(ref)
        kind = gen.primitive(resolved)
        if kind is not None:
            code, size = _FORMATS[kind]
            return [("slot", code, size, (self._kind(kind),), "\x00", path)]
        if isinstance(resolved, EnumType):
            by_value, _ = gen.enum_maps(resolved)
            names = gen.constant("_EL", dict((v, n) for n, v in resolved.literals))
            return [("slot", "I", 4, (("enum", by_value, names),), "\x00", path)]
        if isinstance(resolved, ArrayType):
            return self._array_tokens(resolved)
        if isinstance(resolved, StructType):
            gen.enter(resolved.name)
            try:
                out: list[Token] = []
                for position, member in enumerate(gen.members(resolved)):
                    member_tokens = self.tokens(member.type, self._member(path, member.name))
                    if member_tokens is None:
                        return None
                    out.append(_lit(("{" if position == 0 else ",")
                                    + encode_basestring(member.name) + ":"))
                    out.extend(member_tokens)
                out.append(_lit("}" if out else "{}"))
                return out if _slots(out) <= _MAX_SLOTS else None
            finally:
                gen.leave(resolved.name)
        return None

    def _array_tokens(self, array_type: ArrayType) -> list[Token] | None:
        gen = self.gen
        element = gen.resolve(array_type.element)
        kind = gen.primitive(element)
        dims = list(array_type.dims)
        if kind == "octet":
            inner = dims.pop()
            return _nest_tokens(dims,
                                lambda: [("slot", f"{inner}s", 1, ("octets",), "\x00", None)])
        count = _product(dims)
        if kind is not None or isinstance(element, EnumType):
            if kind is not None:
                code, size = _FORMATS[kind]
                one: Any = self._kind(kind)
            else:
                by_value, _ = gen.enum_maps(element)
                code, size, one = "I", 4, ("enum", by_value)
            template = _nest_text(dims, "\x00")
            return [("slot", f"{count}{code}", size, (one,) * count, template, None)]
        element_tokens = self.tokens(array_type.element)
        if element_tokens is None or count * _slots(element_tokens) > _MAX_SLOTS:
            return None
        return _nest_tokens(dims, lambda: list(element_tokens))

    @staticmethod
    def _kind(kind: str) -> str:
        if kind in _FLOATS:
            return "float"
        if kind in ("boolean", "char"):
            return "bool" if kind == "boolean" else "char"
        return "int"

    def emit(self, tokens: list[Token], align: _Align) -> str:
        """Unpacks the slots (one struct call per statically aligned run); returns an
        expression of the JSON text."""
        pieces: list[str] = []
        run = _Run()
        for token in tokens:
            if token[0] == "lit":
                run.text.append(token[1].replace("%", "%%"))
                continue
            _, code, alignment, kinds, template, path = token  # type: ignore[misc]
            pad = align.pad(alignment)
            if pad is None:
                if run.slots:
                    pieces.append(self._flush(run))
                    run = _Run(text=[])
                self.out.add(f"p = (p + {alignment - 1}) & -{alignment}")
                align.aligned(alignment)
                pad = 0
            run.add(code, pad, kinds, template)
            if path is not None and path in self.wanted:
                run.extract.append((run.values - 1, kinds[0], self.wanted[path]))
                self.assigned.add(path)
            align.advance(pad + struct.calcsize("<" + code))
        if run.slots:
            pieces.append(self._flush(run))
        elif run.text:
            pieces.append(repr("".join(run.text).replace("%%", "%")))
        return " + ".join(pieces) if pieces else "''"

    def _flush(self, run: _Run) -> str:
        gen = self.gen
        unpack = gen.constant("_R", struct.Struct(run.format).unpack_from)
        var = gen.name("t")
        self.out.add(f"{var} = {unpack}(mv, p)")
        self.out.add(f"p += {run.size}")
        if run.floats:
            total = " + ".join(f"sum({var}[{a}:{b}])" if b - a > 1 else f"{var}[{a}]"
                               for a, b in run.float_ranges())
            self.out.add(f"s = {total}")
            self.out.add("if s - s != 0.0:")
            self.out.add(f"    {var} = _fix({var})")
        for index, kind, target in run.extract:
            value = f"{var}[{index}]"
            if kind == "bool":
                value = f"{value} == 1"
            elif kind == "char":
                value = f"chr({value})"
            elif isinstance(kind, tuple):
                value = f"{kind[2]}[{value}]"
            self.out.add(f"{target} = {value}")
        args = ", ".join(arg.replace("@", var) for arg in run.args)
        return f"({''.join(run.text)!r} % ({args},))"

    # -- variable-size values ---------------------------------------------------------------

    def variable(self, ref: TypeRef, align: _Align, path: str | None = None) -> str:
        resolved = self.gen.resolve(ref)
        if isinstance(resolved, StructType):
            return self.struct(resolved, align, path)
        if isinstance(resolved, UnionType):
            return self.union(resolved, align)
        if isinstance(resolved, StringType):
            return self.string(resolved.bound, align, path)
        if isinstance(resolved, SequenceType):
            count = self.length(align)
            if resolved.bound is not None:
                self.out.add(f"if {count} > {resolved.bound}:")
                self.out.add("    raise _E('sequence bound')")
            text = self.elements(resolved.element, count, align)
            align.forget()
            return text
        if isinstance(resolved, ArrayType) and len(resolved.dims) == 1:
            text = self.elements(resolved.element, str(resolved.dims[0]), align)
            align.forget()
            return text
        raise Unsupported(repr(resolved))

    def struct(self, struct_type: StructType, align: _Align, path: str | None = None) -> str:
        gen = self.gen
        gen.enter(struct_type.name)
        try:
            pieces: list[str] = []
            pending: list[Token] = []
            members = gen.members(struct_type)
            for position, member in enumerate(members):
                lead = _lit(("{" if position == 0 else ",")
                            + encode_basestring(member.name) + ":")
                member_path = self._member(path, member.name)
                member_tokens = self.tokens(member.type, member_path)
                if member_tokens is not None:
                    pending += [lead, *member_tokens]
                    continue
                pending.append(lead)
                pieces.append(self.emit(pending, align))
                pending = []
                pieces.append(self.variable(member.type, align, member_path))
            pending.append(_lit("}" if members else "{}"))
            pieces.append(self.emit(pending, align))
            var = gen.name("j")
            self.out.add(f"{var} = {' + '.join(pieces)}")
            return var
        finally:
            gen.leave(struct_type.name)

    def aligned(self, alignment: int, align: _Align) -> None:
        pad = align.pad(alignment)
        if pad is None:
            self.out.add(f"p = (p + {alignment - 1}) & -{alignment}")
        elif pad:
            self.out.add(f"p += {pad}")
        align.aligned(alignment)

    def length(self, align: _Align) -> str:
        self.aligned(4, align)
        var = self.gen.name("n")
        self.out.add(f"{var} = _U32(mv, p)[0]")
        self.out.add("p += 4")
        align.advance(4)
        return var

    def string(self, bound: int | None, align: _Align, path: str | None = None) -> str:
        n = self.length(align)
        var = self.gen.name("s")
        if path is not None and path in self.wanted:
            self.assigned.add(path)
            target = self.wanted[path]
        else:
            target = None
        self.out.add(f"if {n} == 0 or p + {n} > L or mv[p + {n} - 1] != 0:")
        self.out.add("    raise _E('bad string')")
        self.out.add(f"{var} = _utf8(mv[p:p + {n} - 1], 'utf-8')")
        self.out.add(f"p += {n}")
        check = f"'\\x00' in {var}"
        if bound is not None:
            check += f" or {n} - 1 > {bound}"
        self.out.add(f"if {check}:")
        self.out.add("    raise _E('bad string')")
        if target is not None:
            self.out.add(f"{target} = {var}")
        align.forget()
        return f"_str({var})"

    def elements(self, element_ref: TypeRef, count: str, align: _Align) -> str:
        """Reads ``count`` elements; returns an expression of their JSON array."""
        gen = self.gen
        out = self.out
        element = gen.resolve(element_ref)
        kind = gen.primitive(element)
        var = gen.name("a")
        if kind == "octet":
            out.add(f"if p + {count} > L:")
            out.add("    raise _E('short')")
            out.add(f"{var} = _b64(mv[p:p + {count}])")
            out.add(f"p += {count}")
            return var
        if (kind is not None and kind != "char") or isinstance(element, EnumType):
            code, size = _FORMATS[kind] if kind is not None else ("I", 4)
            if size > 1:
                out.add(f"if {count}:")
                out.add(f"    p = (p + {size - 1}) & -{size}")
            end = gen.name("e")
            out.add(f"{end} = p + {count} * {size}")
            out.add(f"if {end} > L:")
            out.add("    raise _E('short')")
            out.add(f"{var} = mv[p:{end}].cast({code!r}).tolist()")
            out.add(f"p = {end}")
            if kind in _FLOATS:
                return f"_floats({var})"
            if kind == "boolean":
                out.add(f"if {var} and max({var}) > 1:")
                out.add("    raise _E('bad boolean')")
                return f"('[' + ','.join([_B[x] for x in {var}]) + ']')"
            if isinstance(element, EnumType):
                by_value, _ = gen.enum_maps(element)
                return f"('[' + ','.join([{by_value}[x] for x in {var}]) + ']')"
            return f"_dump({var})"
        out.add(f"{var} = []")
        out.add(f"for _ in range({count}):")
        out.depth += 1
        text = self.value(element_ref, _Align(1, 0))
        out.add(f"{var}.append({text})")
        out.depth -= 1
        return f"('[' + ','.join({var}) + ']')"

    def union(self, union: UnionType, align: _Align) -> str:
        gen = self.gen
        out = self.out
        gen.enter(union.name)
        try:
            labelled, default = gen.union_cases(union)
            code, size, enum_type = gen.discriminator(union)
            self.aligned(size, align)
            disc = gen.name("d")
            unpack = gen.constant("_D", struct.Struct("<" + code).unpack_from)
            out.add(f"{disc} = {unpack}(mv, p)[0]")
            out.add(f"p += {size}")
            align.advance(size)
            head = gen.name("h")
            if enum_type is not None:
                by_value, _ = gen.enum_maps(enum_type)
                out.add(f"{head} = '{{\"discriminator\":' + {by_value}[{disc}]")
            elif code == "B" and union.discriminator and _is_boolean(gen, union):
                out.add(f"{head} = '{{\"discriminator\":' + _B[{disc}]")
            else:
                out.add(f"{head} = '{{\"discriminator\":' + str({disc})")
            result = gen.name("u")
            keyword = "if"
            for case, labels in labelled:
                out.add(f"{keyword} {disc} in {labels!r}:")
                keyword = "elif"
                self._case(case, head, result, align.copy())
            out.add("else:" if keyword == "elif" else "if True:")
            if default is not None:
                self._case(default, head, result, align.copy())
            else:
                out.add(f"    {result} = {head} + '}}'")
            align.forget()
            return result
        finally:
            gen.leave(union.name)

    def _case(self, case: Any, head: str, result: str, align: _Align) -> None:
        self.out.depth += 1
        text = self.value(case.type, align)
        member = "," + encode_basestring(case.name) + ":"
        self.out.add(f"{result} = {head} + {member!r} + {text} + '}}'")
        self.out.depth -= 1


def _is_boolean(gen: _Generator, union: UnionType) -> bool:
    resolved = gen.resolve(union.discriminator)
    return isinstance(resolved, PrimitiveType) and resolved.kind == "boolean"


def _slots(tokens: list[Token]) -> int:
    return sum(1 for token in tokens if token[0] == "slot")


class _Run:
    """One struct call's worth of slots: format, size, JSON template and arguments."""

    def __init__(self, text: list[str] | None = None) -> None:
        self.format = "<"
        self.size = 0
        self.text: list[str] = text if text is not None else []
        self.args: list[str] = []  # "@" stands for the tuple variable
        self.slots = 0
        self.floats: list[int] = []
        self.extract: list[tuple[int, Any, str]] = []  # (value index, kind, variable)
        self._index = 0

    @property
    def values(self) -> int:
        return self._index

    def add(self, code: str, pad: int, kinds: tuple[Any, ...], template: str) -> None:
        self.format += "x" * pad + code
        self.size += pad + struct.calcsize("<" + code)
        self.slots += 1
        placeholders: list[str] = []
        for kind in kinds:
            index = self._index
            self._index += 1
            if kind == "int":
                placeholders.append("%d")
                self.args.append(f"@[{index}]")
            elif kind == "float":
                placeholders.append("%r")
                self.args.append(f"@[{index}]")
                self.floats.append(index)
            elif kind == "bool":
                placeholders.append("%s")
                self.args.append(f"_B[@[{index}]]")
            elif kind == "char":
                placeholders.append("%s")
                self.args.append(f"_chr(@[{index}])")
            elif kind == "octets":
                placeholders.append("%s")
                self.args.append(f"_b64(@[{index}])")
            else:  # ("enum", text constant, name constant)
                placeholders.append("%s")
                self.args.append(f"{kind[1]}[@[{index}]]")
        parts = template.replace("%", "%%").split("\x00")
        text = parts[0]
        for placeholder, part in zip(placeholders, parts[1:], strict=True):
            text += placeholder + part
        self.text.append(text)

    def float_ranges(self) -> list[tuple[int, int]]:
        ranges: list[tuple[int, int]] = []
        for index in self.floats:
            if ranges and ranges[-1][1] == index:
                ranges[-1] = (ranges[-1][0], index + 1)
            else:
                ranges.append((index, index + 1))
        return ranges


class _Encoder:
    """Emits statements appending the CDR of a JSON value to ``o``. Checked primitives
    wait in ``pending`` so that a run of them becomes one ``pack``."""

    def __init__(self, gen: _Generator, out: _Lines) -> None:
        self.gen = gen
        self.out = out
        self.pending: list[tuple[str, str]] = []  # (format with padding, value expression)

    def flush(self, align: _Align) -> None:
        if not self.pending:
            return
        fmt = "<" + "".join(code for code, _ in self.pending)
        pack = self.gen.constant("_W", struct.Struct(fmt).pack)
        values = ", ".join(expr for _, expr in self.pending)
        self.out.add(f"o += {pack}({values})")
        self.pending = []

    def put(self, code: str, size: int, expr: str, align: _Align) -> None:
        """Appends a fixed value (checked already) to the pending pack."""
        pad = align.pad(size)
        if pad is None:
            self.flush(align)
            self.out.add(f"o += bytes((4 - len(o)) & {size - 1})")
            align.aligned(size)
            pad = 0
        self.pending.append(("x" * pad + code, expr))
        align.advance(pad + size)

    def pad(self, alignment: int, align: _Align) -> None:
        """Flushes and aligns ``o`` (for what is appended directly)."""
        self.flush(align)
        pad = align.pad(alignment)
        if pad is None:
            self.out.add(f"o += bytes((4 - len(o)) & {alignment - 1})")
        elif pad:
            self.out.add(f"o += {bytes(pad)!r}")
        align.aligned(alignment)

    def value(self, ref: TypeRef, var: str, align: _Align) -> None:
        gen = self.gen
        resolved = gen.resolve(ref)
        kind = gen.primitive(resolved)
        if kind is not None:
            self.check(kind, var)
            code, size = _FORMATS[kind]
            self.put(code, size, f"ord({var})" if kind == "char" else var, align)
        elif isinstance(resolved, EnumType):
            _, by_name = gen.enum_maps(resolved)
            wire = gen.name("w")
            self.out.add(f"{wire} = {by_name}[{var}]")
            self.put("I", 4, wire, align)
        elif isinstance(resolved, StringType):
            self.string(resolved.bound, var, align)
        elif isinstance(resolved, StructType):
            self.struct(resolved, var, align)
        elif isinstance(resolved, UnionType):
            self.union(resolved, var, align)
        elif isinstance(resolved, SequenceType):
            self.sequence(resolved, var, align)
        elif isinstance(resolved, ArrayType):
            self.array(resolved, var, align)
        else:
            raise Unsupported(repr(resolved))

    def check(self, kind: str, var: str) -> None:
        out = self.out
        if kind in _INTEGERS:
            out.add(f"if type({var}) is not int:")
        elif kind in _FLOATS:
            if kind == "float32":
                out.add(f"if type({var}) not in _NUM or {var} > _F32 or {var} < -_F32:")
            else:
                out.add(f"if type({var}) not in _NUM:")
        elif kind == "boolean":
            out.add(f"if type({var}) is not bool:")
        else:  # char
            out.add(f"if type({var}) is not str or len({var}) != 1 or ord({var}) > 127:")
        out.add("    raise _E('value')")

    def string(self, bound: int | None, var: str, align: _Align) -> None:
        out = self.out
        out.add(f"if type({var}) is not str or '\\x00' in {var}:")
        out.add("    raise _E('string')")
        data = self.gen.name("b")
        out.add(f"{data} = {var}.encode('utf-8')")
        if bound is not None:
            out.add(f"if len({data}) > {bound}:")
            out.add("    raise _E('string bound')")
        self.pad(4, align)
        out.add(f"o += _P32(len({data}) + 1)")
        out.add(f"o += {data}")
        out.add("o.append(0)")
        align.forget()

    def struct(self, struct_type: StructType, var: str, align: _Align) -> None:
        gen = self.gen
        gen.enter(struct_type.name)
        try:
            members = gen.members(struct_type)
            self.out.add(f"if type({var}) is not dict or len({var}) != {len(members)}:")
            self.out.add("    raise _E('object')")
            for member in members:
                item = gen.name("v")
                self.out.add(f"{item} = {var}[{member.name!r}]")
                self.value(member.type, item, align)
        finally:
            gen.leave(struct_type.name)

    def sequence(self, seq: SequenceType, var: str, align: _Align) -> None:
        gen = self.gen
        out = self.out
        element = gen.resolve(seq.element)
        if gen.primitive(element) == "octet":
            data = gen.name("b")
            out.add(f"{data} = _unb64({var})")
            if seq.bound is not None:
                out.add(f"if len({data}) > {seq.bound}:")
                out.add("    raise _E('bound')")
            self.pad(4, align)
            out.add(f"o += _P32(len({data}))")
            out.add(f"o += {data}")
            align.forget()
            return
        out.add(f"if type({var}) is not list:")
        out.add("    raise _E('array')")
        if seq.bound is not None:
            out.add(f"if len({var}) > {seq.bound}:")
            out.add("    raise _E('bound')")
        self.pad(4, align)
        out.add(f"o += _P32(len({var}))")
        align.forget()
        self.elements(seq.element, var, f"len({var})")

    def array(self, array_type: ArrayType, var: str, align: _Align) -> None:
        gen = self.gen
        out = self.out
        dims = list(array_type.dims)
        element = gen.resolve(array_type.element)
        if gen.primitive(element) == "octet":
            inner = dims.pop()
            flat = self.flatten(var, dims) if dims else None
            parts = gen.name("b")
            if flat is None:
                out.add(f"{parts} = [_unb64({var})]")
            else:
                out.add(f"{parts} = [_unb64(x) for x in {flat}]")
            out.add(f"for x in {parts}:")
            out.add(f"    if len(x) != {inner}:")
            out.add("        raise _E('octets')")
            self.flush(align)
            out.add(f"o += b''.join({parts})")
            align.forget()
            return
        flat = self.flatten(var, dims)
        self.flush(align)
        align.forget()
        self.elements(array_type.element, flat, str(_product(dims)))

    def flatten(self, var: str, dims: list[int]) -> str:
        """Checks nested lists against ``dims``; returns a variable of the flat list."""
        out = self.out
        out.add(f"if type({var}) is not list or len({var}) != {dims[0]}:")
        out.add("    raise _E('array')")
        if len(dims) == 1:
            return var
        flat = self.gen.name("f")
        out.add(f"{flat} = []")
        level = var
        for depth, dim in enumerate(dims[1:], start=1):
            item = self.gen.name("x")
            out.add(f"for {item} in {level}:")
            out.depth += 1
            out.add(f"if type({item}) is not list or len({item}) != {dim}:")
            out.add("    raise _E('array')")
            level = item
            if depth == len(dims) - 1:
                out.add(f"{flat}.extend({item})")
        out.depth -= len(dims) - 1
        return flat

    def elements(self, element_ref: TypeRef, var: str, count: str) -> None:
        """Appends the elements of list ``var`` (position unknown, nothing pending)."""
        gen = self.gen
        out = self.out
        element = gen.resolve(element_ref)
        kind = gen.primitive(element)
        if kind is not None and kind != "char":
            code, size = _FORMATS[kind]
            if kind in _INTEGERS:
                out.add(f"for x in {var}:")
                out.add("    if type(x) is not int:")
                out.add("        raise _E('integer')")
            elif kind in _FLOATS:
                out.add(f"for x in {var}:")
                out.add("    if type(x) not in _NUM:")
                out.add("        raise _E('number')")
                if kind == "float32":
                    out.add(f"if {var} and (max({var}) > _F32 or min({var}) < -_F32):")
                    out.add("    raise _E('float32 range')")
            else:
                out.add(f"for x in {var}:")
                out.add("    if type(x) is not bool:")
                out.add("        raise _E('boolean')")
            if size > 1:
                out.add(f"if {count}:")
                out.add(f"    o += bytes((4 - len(o)) & {size - 1})")
            out.add(f"o += _array({code!r}, {var}).tobytes()")
            return
        if isinstance(element, EnumType):
            _, by_name = gen.enum_maps(element)
            out.add(f"if {count}:")
            out.add("    o += bytes((4 - len(o)) & 3)")
            out.add(f"o += _array('I', [{by_name}[x] for x in {var}]).tobytes()")
            return
        item = gen.name("v")
        out.add(f"for {item} in {var}:")
        out.depth += 1
        inner = _Align(1, 0)
        self.value(element_ref, item, inner)
        self.flush(inner)
        out.depth -= 1

    def union(self, union: UnionType, var: str, align: _Align) -> None:
        gen = self.gen
        out = self.out
        gen.enter(union.name)
        try:
            labelled, default = gen.union_cases(union)
            code, size, enum_type = gen.discriminator(union)
            out.add(f"if type({var}) is not dict:")
            out.add("    raise _E('object')")
            disc = gen.name("d")
            out.add(f"{disc} = {var}['discriminator']")
            wire = gen.name("w")
            if enum_type is not None:
                _, by_name = gen.enum_maps(enum_type)
                out.add(f"{wire} = {by_name}[{disc}]")
            else:
                self.check("boolean" if _is_boolean(gen, union) else "int64", disc)
                out.add(f"{wire} = int({disc})")
            self.put(code, size, wire, align)
            self.flush(align)
            keyword = "if"
            for case, labels in labelled:
                out.add(f"{keyword} {wire} in {labels!r}:")
                keyword = "elif"
                self._case(case, var, align.copy())
            out.add("else:" if keyword == "elif" else "if True:")
            if default is not None:
                self._case(default, var, align.copy())
            else:
                out.add(f"    if len({var}) != 1:")
                out.add("        raise _E('no member')")
            align.forget()
        finally:
            gen.leave(union.name)

    def _case(self, case: Any, var: str, align: _Align) -> None:
        out = self.out
        out.depth += 1
        out.add(f"if len({var}) != 2:")
        out.add("    raise _E('one member')")
        item = self.gen.name("v")
        out.add(f"{item} = {var}[{case.name!r}]")
        self.value(case.type, item, align)
        self.flush(align)
        out.depth -= 1
