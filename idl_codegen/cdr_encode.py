"""The encoding half of a generated transcoder: a JSON value -> CDR appended to ``o``,
every member checked as strictly as the JSON codec's ``from_json(strict=True)``."""

from __future__ import annotations

import struct
from typing import Any

from idl_codegen.cdr_types import (
    FLOATS,
    FORMATS,
    INTEGERS,
    Align,
    Generator,
    Lines,
    Unsupported,
    is_boolean,
    product,
)
from idl_codegen.emit_jsonschema import ENUM_MAX
from idl_codegen.model import (
    ArrayType,
    EnumType,
    SequenceType,
    StringType,
    StructType,
    TypeRef,
    UnionType,
)

__all__ = ["Encoder"]

class Encoder:
    """Emits statements appending the CDR of a JSON value to ``o``. Checked primitives
    wait in ``pending`` so that a run of them becomes one ``pack``."""

    def __init__(self, gen: Generator, out: Lines) -> None:
        self.gen = gen
        self.out = out
        self.pending: list[tuple[str, str]] = []  # (format with padding, value expression)

    def flush(self, align: Align) -> None:
        if not self.pending:
            return
        fmt = "<" + "".join(code for code, _ in self.pending)
        pack = self.gen.constant("_W", struct.Struct(fmt).pack)
        values = ", ".join(expr for _, expr in self.pending)
        self.out.add(f"o += {pack}({values})")
        self.pending = []

    def put(self, code: str, size: int, expr: str, align: Align) -> None:
        """Appends a fixed value (checked already) to the pending pack."""
        pad = align.pad(size)
        if pad is None:
            self.flush(align)
            self.out.add(f"o += bytes((4 - len(o)) & {size - 1})")
            align.aligned(size)
            pad = 0
        self.pending.append(("x" * pad + code, expr))
        align.advance(pad + size)

    def pad(self, alignment: int, align: Align) -> None:
        """Flushes and aligns ``o`` (for what is appended directly)."""
        self.flush(align)
        pad = align.pad(alignment)
        if pad is None:
            self.out.add(f"o += bytes((4 - len(o)) & {alignment - 1})")
        elif pad:
            self.out.add(f"o += {bytes(pad)!r}")
        align.aligned(alignment)

    def value(self, ref: TypeRef, var: str, align: Align) -> None:
        gen = self.gen
        resolved = gen.resolve(ref)
        kind = gen.primitive(resolved)
        if kind is not None:
            self.check(kind, var)
            code, size = FORMATS[kind]
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
        if kind in INTEGERS:
            out.add(f"if type({var}) is not int:")
        elif kind in FLOATS:
            # x - x is 0 (falsy) for a finite number, NaN (truthy) for inf and NaN
            if kind == "float32":
                out.add(f"if type({var}) not in _NUM or {var} - {var} or {var} > _F32 "
                        f"or {var} < -_F32:")
            else:
                out.add(f"if type({var}) not in _NUM or {var} - {var}:")
        elif kind == "boolean":
            out.add(f"if type({var}) is not bool:")
        else:  # char
            out.add(f"if type({var}) is not str or len({var}) != 1 or ord({var}) > 127:")
        out.add("    raise _E('value')")

    def string(self, bound: int | None, var: str, align: Align) -> None:
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

    def struct(self, struct_type: StructType, var: str, align: Align) -> None:
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

    def sequence(self, seq: SequenceType, var: str, align: Align) -> None:
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

    def array(self, array_type: ArrayType, var: str, align: Align) -> None:
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
        self.elements(array_type.element, flat, str(product(dims)))

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
            code, size = FORMATS[kind]
            if kind in INTEGERS:
                out.add(f"for x in {var}:")
                out.add("    if type(x) is not int:")
                out.add("        raise _E('integer')")
            elif kind in FLOATS:
                out.add(f"for x in {var}:")
                out.add("    if type(x) not in _NUM or x - x:")  # or not finite
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
        inner = Align(1, 0)
        self.value(element_ref, item, inner)
        self.flush(inner)
        out.depth -= 1

    def union(self, union: UnionType, var: str, align: Align) -> None:
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
                # a literal's name, or an integer that no literal has (as the JSON codec)
                by_value, by_name = gen.enum_maps(enum_type)
                out.add(f"if type({disc}) is int:")
                out.add(f"    if {disc} in {by_value} or not 0 <= {disc} <= {ENUM_MAX}:")
                out.add("        raise _E('discriminator')")
                out.add(f"    {wire} = {disc}")
                out.add("else:")
                out.add(f"    {wire} = {by_name}[{disc}]")
            else:
                self.check("boolean" if is_boolean(gen, union) else "int64", disc)
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

    def _case(self, case: Any, var: str, align: Align) -> None:
        out = self.out
        out.depth += 1
        out.add(f"if len({var}) != 2:")
        out.add("    raise _E('one member')")
        item = self.gen.name("v")
        out.add(f"{item} = {var}[{case.name!r}]")
        self.value(case.type, item, align)
        self.flush(align)
        out.depth -= 1
