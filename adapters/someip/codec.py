"""SOME/IP payload layouts: AUTOSAR SOME/IP serialization to and from JSON (pure).

A layout describes a payload the way a SOME/IP interface description does; YAML
declares it (docs/adapters/someip.md, "Layouts"):

- ``uint8`` .. ``uint64``, ``int8`` .. ``int64``: two's complement, big-endian unless
  ``byte_order: little``; ``float32``, ``float64``: IEEE 754; ``bool``: one byte, 0 or 1.
- ``string``: a BOM, the text and a terminating NUL (PRS_SOMEIP_00084..00093), UTF-8 by
  default or ``encoding: utf-16be`` / ``utf-16le``; with a length field of
  ``length_field: 8 | 16 | 32`` bits (default 32) counting the bytes that follow, or a
  fixed size in bytes (``length: N``), zero-padded.
- ``array``: ``items`` of one layout; ``length: N`` items without a length field, or a
  dynamic array whose length field (``length_field``, default 32 bits) counts bytes;
  ``max_length`` bounds a dynamic array's items.
- ``struct``: ``fields``, each a layout with a ``name``, in order; an optional length
  field (``length_field: 8 | 16 | 32``, default none) counting the bytes of the members;
  members a sender appends past the known ones are skipped.
- A name from the adapter's ``layouts`` stands for that layout.

JSON: structs are objects, arrays lists, integers and booleans as such, floats numbers
(``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` as strings), strings text. A payload that
does not fit raises ``LayoutError``, whose ``path`` names the field (``$.wheels[2]``).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from typing import Any

from gateway.mapping import MappingError

__all__ = ["LENGTH_FIELD_BITS", "PRIMITIVES", "Layout", "LayoutError", "compile_layout"]

LENGTH_FIELD_BITS = (8, 16, 32)
_LENGTH_CODES = {8: "B", 16: "H", 32: "I"}
_INTS = {
    "uint8": ("B", 0, 0xFF),
    "uint16": ("H", 0, 0xFFFF),
    "uint32": ("I", 0, 0xFFFF_FFFF),
    "uint64": ("Q", 0, 0xFFFF_FFFF_FFFF_FFFF),
    "int8": ("b", -0x80, 0x7F),
    "int16": ("h", -0x8000, 0x7FFF),
    "int32": ("i", -0x8000_0000, 0x7FFF_FFFF),
    "int64": ("q", -0x8000_0000_0000_0000, 0x7FFF_FFFF_FFFF_FFFF),
}
_FLOATS = {"float32": "f", "float64": "d"}
PRIMITIVES = (*_INTS, *_FLOATS, "bool")
_BOMS = {"utf-8": b"\xef\xbb\xbf", "utf-16be": b"\xfe\xff", "utf-16le": b"\xff\xfe"}
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_OPTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"type", "name", "byte_order"}),
    "string": frozenset({"type", "name", "byte_order", "encoding", "length", "length_field"}),
    "array": frozenset({"type", "name", "byte_order", "items", "length", "length_field",
                        "max_length"}),
    "struct": frozenset({"type", "name", "byte_order", "fields", "length_field"}),
}  # fmt: skip


class LayoutError(MappingError):
    """A payload does not fit its layout; ``path`` names the field (``$.a.b[2]``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parts: list[str | int] = []

    @property
    def path(self) -> str:
        out = "$"
        for part in self.parts:
            out += f"[{part}]" if isinstance(part, int) else f".{part}"
        return out

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, bytes | bytearray) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _need(data: bytes, pos: int, size: int, end: int) -> None:
    if pos + size > end:
        raise LayoutError(f"needs {size} bytes at offset {pos}, {max(end - pos, 0)} left")


class _Node:
    """One layout node: ``decode(data, pos, end) -> (value, pos)``, ``encode(value, out)``."""

    __slots__ = ("size",)
    size: int | None  # the encoded size when it is fixed

    def decode(self, data: bytes, pos: int, end: int) -> tuple[Any, int]:
        raise NotImplementedError

    def encode(self, value: Any, out: bytearray) -> None:
        raise NotImplementedError


class _Int(_Node):
    __slots__ = ("high", "low", "name", "struct")

    def __init__(self, name: str, order: str) -> None:
        code, self.low, self.high = _INTS[name]
        self.name = name
        self.struct = struct.Struct(order + code)
        self.size = self.struct.size

    def decode(self, data: bytes, pos: int, end: int) -> tuple[Any, int]:
        _need(data, pos, self.size or 0, end)
        return self.struct.unpack_from(data, pos)[0], pos + self.struct.size

    def encode(self, value: Any, out: bytearray) -> None:
        if type(value) is not int or not self.low <= value <= self.high:
            raise LayoutError(
                f"expected an integer from {self.low} to {self.high} ({self.name}),"
                f" got {_show(value)}"
            )
        out += self.struct.pack(value)


class _Float(_Node):
    __slots__ = ("name", "struct")

    def __init__(self, name: str, order: str) -> None:
        self.name = name
        self.struct = struct.Struct(order + _FLOATS[name])
        self.size = self.struct.size

    def decode(self, data: bytes, pos: int, end: int) -> tuple[Any, int]:
        _need(data, pos, self.struct.size, end)
        value: float = self.struct.unpack_from(data, pos)[0]
        return _float_json(value, self.struct), pos + self.struct.size

    def encode(self, value: Any, out: bytearray) -> None:
        if isinstance(value, str) and value in _NON_FINITE:
            value = _NON_FINITE[value]
        if type(value) not in (int, float):
            raise LayoutError(f"expected a number ({self.name}), got {_show(value)}")
        try:
            out += self.struct.pack(value)
        except (OverflowError, struct.error) as exc:
            raise LayoutError(f"{_show(value)} does not fit a {self.name}: {exc}") from None


def _float_json(value: float, packer: struct.Struct) -> float | str:
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if packer.size == 4:
        # The shortest decimal that reads back as the same float32: 27.7, not 27.70000076.
        for digits in range(6, 10):
            short = float(f"{value:.{digits}g}")
            if packer.unpack(packer.pack(short))[0] == value:
                return short
    return value


class _Bool(_Node):
    __slots__ = ()

    def __init__(self) -> None:
        self.size = 1

    def decode(self, data: bytes, pos: int, end: int) -> tuple[Any, int]:
        _need(data, pos, 1, end)
        byte = data[pos]
        if byte > 1:
            raise LayoutError(f"expected a boolean 0 or 1, got {byte}")
        return byte == 1, pos + 1

    def encode(self, value: Any, out: bytearray) -> None:
        if type(value) is not bool:
            raise LayoutError(f"expected true or false, got {_show(value)}")
        out.append(1 if value else 0)


class _Length:
    """A length field of 8, 16 or 32 bits."""

    __slots__ = ("bits", "struct")

    def __init__(self, bits: int, order: str) -> None:
        self.bits = bits
        self.struct = struct.Struct(order + _LENGTH_CODES[bits])

    def read(self, data: bytes, pos: int, end: int) -> tuple[int, int]:
        size = self.struct.size
        _need(data, pos, size, end)
        length: int = self.struct.unpack_from(data, pos)[0]
        pos += size
        if pos + length > end:
            raise LayoutError(
                f"length field says {length} bytes at offset {pos}, {max(end - pos, 0)} left"
            )
        return length, pos

    def reserve(self, out: bytearray) -> int:
        at = len(out)
        out += bytes(self.struct.size)
        return at

    def fill(self, out: bytearray, at: int) -> None:
        length = len(out) - at - self.struct.size
        if length >= 1 << self.bits:
            raise LayoutError(f"{length} bytes do not fit a {self.bits}-bit length field")
        self.struct.pack_into(out, at, length)


_CODEC_OF_BOM = {bom: codec for codec, bom in _BOMS.items()}


def _terminator(body: bytes, width: int) -> int:
    """The offset of the first NUL character (``width`` bytes, aligned), or -1."""
    if width == 1:
        return body.find(b"\x00")
    for i in range(0, len(body) - 1, 2):
        if body[i] == 0 and body[i + 1] == 0:
            return i
    return -1


class _String(_Node):
    __slots__ = ("bom", "fixed", "length", "terminator", "text_codec")

    def __init__(self, encoding: str, length: _Length | None, fixed: int | None) -> None:
        self.bom = _BOMS[encoding]
        self.text_codec = encoding
        self.terminator = b"\x00" if encoding == "utf-8" else b"\x00\x00"
        self.length = length
        self.fixed = fixed
        self.size = fixed

    def decode(self, data: bytes, pos: int, end: int) -> tuple[Any, int]:
        if self.length is not None:
            size, pos = self.length.read(data, pos, end)
        else:
            size = self.fixed or 0
            _need(data, pos, size, end)
        raw = bytes(data[pos : pos + size])
        bom = self.bom
        if len(bom) == 2 and raw[:2] in (b"\xfe\xff", b"\xff\xfe"):
            bom = raw[:2]
        if not raw.startswith(bom):
            raise LayoutError(f"the string does not start with its BOM ({bom.hex()})")
        body = raw[len(bom) :]
        width = len(self.terminator)
        if self.length is not None:
            # A dynamic-length string's length counts BOM, text and NUL: the NUL is its
            # last character (of UTF-16, an odd last byte is ignored), and a NUL before
            # it is a malformed string, not the end of the text.
            body = body[: len(body) - len(body) % width]
            if not body.endswith(self.terminator):
                raise LayoutError("the string has no terminating NUL")
            cut = _terminator(body, width)
            if cut != len(body) - width:
                raise LayoutError(
                    f"the string has a NUL before its end (at byte {cut} of"
                    f" {len(body)} after the BOM)"
                )
        else:  # fixed size: the text ends at the first NUL, zeros pad it
            cut = _terminator(body, width)
            if cut < 0:
                raise LayoutError("the string has no terminating NUL")
        codec = _CODEC_OF_BOM[bom]
        try:
            text = body[:cut].decode(codec)
        except UnicodeDecodeError as exc:
            raise LayoutError(f"the string is not valid {codec}: {exc.reason}") from None
        return text, pos + size

    def encode(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, str):
            raise LayoutError(f"expected a string, got {_show(value)}")
        if "\x00" in value:
            raise LayoutError("a string cannot contain NUL")
        try:
            text = value.encode(self.text_codec)
        except UnicodeEncodeError as exc:  # a lone surrogate, from a JSON "\ud800"
            raise LayoutError(f"the string is not Unicode text: {exc.reason}") from None
        encoded = self.bom + text + self.terminator
        if self.length is not None:
            at = self.length.reserve(out)
            out += encoded
            self.length.fill(out, at)
            return
        fixed = self.fixed or 0
        if len(encoded) > fixed:
            raise LayoutError(
                f"the string takes {len(encoded)} bytes with BOM and NUL; its size is {fixed}"
            )
        out += encoded + bytes(fixed - len(encoded))


class _Array(_Node):
    __slots__ = ("count", "item", "length", "max_length", "packed")

    def __init__(
        self,
        item: _Node,
        count: int | None,
        length: _Length | None,
        max_length: int | None,
        order: str,
    ) -> None:
        self.item = item
        self.count = count
        self.length = length
        self.max_length = max_length
        self.packed: struct.Struct | None = None
        if count is not None and isinstance(item, _Int | _Float):
            self.packed = struct.Struct(f"{order}{count}{item.struct.format[-1]}")
        self.size = count * item.size if count is not None and item.size is not None else None

    def decode(self, data: bytes, pos: int, end: int) -> tuple[Any, int]:
        items: list[Any] = []
        if self.count is not None:
            if self.packed is not None and isinstance(self.item, _Int):
                _need(data, pos, self.packed.size, end)
                return list(self.packed.unpack_from(data, pos)), pos + self.packed.size
            for index in range(self.count):
                try:
                    value, pos = self.item.decode(data, pos, end)
                except LayoutError as exc:
                    exc.parts.insert(0, index)
                    raise
                items.append(value)
            return items, pos
        assert self.length is not None
        size, pos = self.length.read(data, pos, end)
        stop = pos + size
        while pos < stop:
            try:
                value, pos = self.item.decode(data, pos, stop)
            except LayoutError as exc:
                exc.parts.insert(0, len(items))
                raise
            items.append(value)
        if self.max_length is not None and len(items) > self.max_length:
            raise LayoutError(f"{len(items)} items; at most {self.max_length} allowed")
        return items, pos

    def encode(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, list | tuple):
            raise LayoutError(f"expected a list, got {_show(value)}")
        if self.count is not None and len(value) != self.count:
            raise LayoutError(f"expected {self.count} items, got {len(value)}")
        if self.max_length is not None and len(value) > self.max_length:
            raise LayoutError(f"{len(value)} items; at most {self.max_length} allowed")
        at = self.length.reserve(out) if self.length is not None else -1
        for index, item in enumerate(value):
            try:
                self.item.encode(item, out)
            except LayoutError as exc:
                exc.parts.insert(0, index)
                raise
        if self.length is not None:
            self.length.fill(out, at)


class _Struct(_Node):
    __slots__ = ("fields", "length", "names")

    def __init__(self, fields: list[tuple[str, _Node]], length: _Length | None) -> None:
        self.fields = fields
        self.names = frozenset(name for name, _ in fields)
        self.length = length
        sizes = [node.size for _, node in fields]
        fixed = length is None and all(size is not None for size in sizes)
        self.size = sum(size or 0 for size in sizes) if fixed else None

    def decode(self, data: bytes, pos: int, end: int) -> tuple[Any, int]:
        stop = end
        if self.length is not None:
            size, pos = self.length.read(data, pos, end)
            stop = pos + size
        value: dict[str, Any] = {}
        for name, node in self.fields:
            try:
                value[name], pos = node.decode(data, pos, stop)
            except LayoutError as exc:
                exc.parts.insert(0, name)
                raise
        # With a length field, members past the known ones (a newer sender) are skipped.
        return value, (stop if self.length is not None else pos)

    def encode(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, Mapping):
            raise LayoutError(f"expected an object, got {_show(value)}")
        unknown = [key for key in value if key not in self.names]
        if unknown:
            raise LayoutError(f"unknown field {unknown[0]!r}")
        at = self.length.reserve(out) if self.length is not None else -1
        for name, node in self.fields:
            if name not in value:
                error = LayoutError("missing")
                error.parts.append(name)
                raise error
            try:
                node.encode(value[name], out)
            except LayoutError as exc:
                exc.parts.insert(0, name)
                raise
        if self.length is not None:
            self.length.fill(out, at)


class Layout:
    """A compiled layout: SOME/IP payload bytes <-> a JSON value."""

    __slots__ = ("_root", "spec")

    def __init__(self, root: _Node, spec: Any) -> None:
        self._root = root
        self.spec = spec

    def decode(self, data: bytes) -> Any:
        """The value of ``data``; ``LayoutError`` when it does not fit."""
        value, pos = self._root.decode(data, 0, len(data))
        if pos != len(data):
            raise LayoutError(f"{len(data) - pos} bytes left over after the layout")
        return value

    def encode(self, value: Any) -> bytes:
        """The payload of ``value``; ``LayoutError`` when it does not fit."""
        out = bytearray()
        self._root.encode(value, out)
        return bytes(out)

    def to_json(self, data: bytes) -> bytes:
        """SOME/IP payload -> JSON text (UTF-8)."""
        return self.dumps(self.decode(data))

    @staticmethod
    def dumps(value: Any) -> bytes:
        """A decoded value as JSON text (UTF-8)."""
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()

    def from_json(self, text: bytes) -> bytes:
        """JSON text -> SOME/IP payload."""
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise LayoutError(f"not JSON: {exc}") from None
        return self.encode(value)


# --- compiling a YAML declaration -------------------------------------------------------


class _Compiler:
    def __init__(self, named: Mapping[str, Any]) -> None:
        self.named = named
        self.active: list[str] = []

    def node(self, spec: Any, where: str, order: str) -> _Node:
        # a type name alone (``layout: uint8``) is reported at its own key, not at .type
        at_type = where if isinstance(spec, str) else f"{where}.type"
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where}: expected a type name or a mapping, got {_show(spec)}")
        kind = spec.get("type")
        if not isinstance(kind, str):
            raise ValueError(f"{where}: missing 'type'")
        if "byte_order" in spec:
            if spec["byte_order"] not in ("big", "little"):
                raise ValueError(f"{where}.byte_order: expected big or little")
            order = ">" if spec["byte_order"] == "big" else "<"
        if kind in self.named:
            return self._named(kind, spec, where, order)
        group = "int" if kind in PRIMITIVES else kind
        if group not in _OPTIONS:
            layouts = sorted(set(self.named) - set(self.active))
            known = ", ".join([*PRIMITIVES, "string", "array", "struct", *layouts])
            raise ValueError(f"{at_type}: unknown type {kind!r}; known: {known}")
        unknown = sorted(set(spec) - _OPTIONS[group])
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r} for type {kind}")
        if kind in _INTS:
            return _Int(kind, order)
        if kind in _FLOATS:
            return _Float(kind, order)
        if kind == "bool":
            return _Bool()
        if kind == "string":
            return self._string(spec, where, order)
        if kind == "array":
            return self._array(spec, where, order)
        return self._struct(spec, where, order)

    def _named(self, kind: str, spec: Mapping[str, Any], where: str, order: str) -> _Node:
        extra = sorted(set(spec) - {"type", "name", "byte_order"})
        if extra:
            raise ValueError(f"{where}: unknown key {extra[0]!r} for layout {kind}")
        if kind in self.active:
            raise ValueError(f"{where}: layout {kind!r} contains itself")
        self.active.append(kind)
        try:
            return self.node(self.named[kind], f"layouts.{kind}", order)
        finally:
            self.active.pop()

    @staticmethod
    def _length(
        spec: Mapping[str, Any], where: str, order: str, default: int | None
    ) -> _Length | None:
        bits = spec.get("length_field", default)
        if bits in (None, 0):
            return None
        if bits not in LENGTH_FIELD_BITS:
            raise ValueError(f"{where}.length_field: expected 8, 16 or 32 (bits), got {bits!r}")
        return _Length(bits, order)

    @staticmethod
    def _count(spec: Mapping[str, Any], key: str, where: str) -> int | None:
        value = spec.get(key)
        if value is None:
            return None
        if type(value) is not int or value < 0:
            raise ValueError(f"{where}.{key}: expected a whole number, got {_show(value)}")
        return value

    def _string(self, spec: Mapping[str, Any], where: str, order: str) -> _Node:
        encoding = spec.get("encoding", "utf-8")
        if encoding not in _BOMS:
            raise ValueError(f"{where}.encoding: expected utf-8, utf-16be or utf-16le")
        fixed = self._count(spec, "length", where)
        if fixed is not None and "length_field" in spec:
            raise ValueError(
                f"{where}: 'length' (fixed size) and 'length_field' exclude each other"
            )
        length = None if fixed is not None else self._length(spec, where, order, 32)
        if fixed is None and length is None:
            raise ValueError(f"{where}: a string needs a length field or a fixed 'length'")
        if fixed is not None and fixed < len(_BOMS[encoding]) + (1 if encoding == "utf-8" else 2):
            raise ValueError(f"{where}.length: too small for the BOM and the NUL")
        return _String(encoding, length, fixed)

    def _array(self, spec: Mapping[str, Any], where: str, order: str) -> _Node:
        if "items" not in spec:
            raise ValueError(f"{where}: an array needs 'items'")
        item = self.node(spec["items"], f"{where}.items", order)
        count = self._count(spec, "length", where)
        max_length = self._count(spec, "max_length", where)
        if count is not None and ("length_field" in spec or max_length is not None):
            raise ValueError(f"{where}: 'length' (fixed) excludes 'length_field' and 'max_length'")
        length = None if count is not None else self._length(spec, where, order, 32)
        if count is None and length is None:
            raise ValueError(f"{where}: an array needs a length field or a fixed 'length'")
        return _Array(item, count, length, max_length, order)

    def _struct(self, spec: Mapping[str, Any], where: str, order: str) -> _Node:
        fields = spec.get("fields")
        if not isinstance(fields, list | tuple) or not fields:
            raise ValueError(f"{where}: a struct needs a non-empty list of 'fields'")
        compiled: list[tuple[str, _Node]] = []
        for index, field in enumerate(fields):
            at = f"{where}.fields[{index}]"
            name = field.get("name") if isinstance(field, Mapping) else None
            if not isinstance(name, str) or not name:
                raise ValueError(f"{at}: a field needs a 'name'")
            if any(name == seen for seen, _ in compiled):
                raise ValueError(f"{at}.name: duplicate field {name!r}")
            compiled.append((name, self.node(field, at, order)))
        return _Struct(compiled, self._length(spec, where, order, None))


def compile_layout(
    spec: Any, named: Mapping[str, Any] | None = None, name: str | None = None
) -> Layout:
    """Compiles a YAML layout declaration; ``ValueError`` names the key that is wrong.

    ``named``: the adapter's ``layouts`` (name -> declaration), which ``spec`` and each
    other may refer to by name; ``name``: the one of them ``spec`` is (it may not refer to
    itself).
    """
    compiler = _Compiler(named or {})
    if name is not None:
        compiler.active.append(name)
    return Layout(compiler.node(spec, "layout", ">"), spec)
