"""The decoding half of a generated transcoder: CDR at ``p`` -> JSON text.

Fixed-size values become *tokens* (literal JSON text, and slots of one ``struct`` item
each); runs of slots whose alignment is known statically are unpacked by one ``struct``
call and formatted by one ``%`` template. Variable-size values (strings, sequences,
unions, structs holding them) are read with dynamic alignment.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from idl_codegen.cdr_types import (
    FLOATS,
    FORMATS,
    Align,
    Generator,
    Lines,
    Unsupported,
    is_boolean,
    product,
)
from idl_codegen.model import (
    ArrayType,
    EnumType,
    SequenceType,
    StringType,
    StructType,
    TypeRef,
    UnionType,
)

__all__ = ["Decoder"]

# Tokens of a fixed-size value, for the decoder: literal JSON text, or a slot of one
# struct item (format, alignment, the kinds of the values it unpacks, its JSON template
# with "\x00" standing for each value, and the member path of a single value).
Lit = tuple[str, str]
Slot = tuple[str, str, int, tuple[Any, ...], str, str | None]
Token = Lit | Slot
_MAX_SLOTS = 512


def _lit(text: str) -> Lit:
    return ("lit", text)


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


class Decoder:
    """Emits statements reading CDR at ``p``; returns expressions of JSON text."""

    def __init__(self, gen: Generator, out: Lines, wanted: dict[str, str] | None = None
                 ) -> None:
        self.gen = gen
        self.out = out
        self.wanted = wanted or {}  # member path -> variable holding its JSON value
        self.assigned: set[str] = set()

    def value(self, ref: TypeRef, align: Align, path: str | None = None) -> str:
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
            code, size = FORMATS[kind]
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
        count = product(dims)
        if kind is not None or isinstance(element, EnumType):
            if kind is not None:
                code, size = FORMATS[kind]
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
        if kind in FLOATS:
            return "float"
        if kind in ("boolean", "char"):
            return "bool" if kind == "boolean" else "char"
        return "int"

    def emit(self, tokens: list[Token], align: Align) -> str:
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

    def variable(self, ref: TypeRef, align: Align, path: str | None = None) -> str:
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

    def struct(self, struct_type: StructType, align: Align, path: str | None = None) -> str:
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

    def aligned(self, alignment: int, align: Align) -> None:
        pad = align.pad(alignment)
        if pad is None:
            self.out.add(f"p = (p + {alignment - 1}) & -{alignment}")
        elif pad:
            self.out.add(f"p += {pad}")
        align.aligned(alignment)

    def length(self, align: Align) -> str:
        self.aligned(4, align)
        var = self.gen.name("n")
        self.out.add(f"{var} = _U32(mv, p)[0]")
        self.out.add("p += 4")
        align.advance(4)
        return var

    def string(self, bound: int | None, align: Align, path: str | None = None) -> str:
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

    def elements(self, element_ref: TypeRef, count: str, align: Align) -> str:
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
            code, size = FORMATS[kind] if kind is not None else ("I", 4)
            if size > 1:
                out.add(f"if {count}:")
                out.add(f"    p = (p + {size - 1}) & -{size}")
            end = gen.name("e")
            out.add(f"{end} = p + {count} * {size}")
            out.add(f"if {end} > L:")
            out.add("    raise _E('short')")
            out.add(f"{var} = mv[p:{end}].cast({code!r}).tolist()")
            out.add(f"p = {end}")
            if kind in FLOATS:
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
        text = self.value(element_ref, Align(1, 0))
        out.add(f"{var}.append({text})")
        out.depth -= 1
        return f"('[' + ','.join({var}) + ']')"

    def union(self, union: UnionType, align: Align) -> str:
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
                # a value no literal has (cyclonedds writes one for the default member, a
                # peer may send any) is the integer, as the JSON codec gives it
                by_value, _ = gen.enum_maps(enum_type)
                out.add(f"{head} = '{{\"discriminator\":' + ({by_value}[{disc}] if {disc} in "
                        f"{by_value} else str({disc}))")
            elif code == "B" and union.discriminator and is_boolean(gen, union):
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

    def _case(self, case: Any, head: str, result: str, align: Align) -> None:
        self.out.depth += 1
        text = self.value(case.type, align)
        member = "," + encode_basestring(case.name) + ":"
        self.out.add(f"{result} = {head} + {member!r} + {text} + '}}'")
        self.out.depth -= 1


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
