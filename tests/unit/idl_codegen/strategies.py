"""Hypothesis strategies for samples of any cyclonedds type, from its type description.

Values have the Python shape cyclonedds itself produces when it deserializes (octet and
uint8 arrays are ``bytes``, sequences are lists, unions carry an explicit
discriminator), so a sample equals its CDR round trip. NaN is left out (it is never
equal to itself); infinities are in. Recursive types stop growing at ``max_depth``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from idl_codegen.introspect import Described, describe
from idl_codegen.model import (
    INTEGER_RANGES,
    ArrayType,
    EnumType,
    PrimitiveType,
    SequenceType,
    StringType,
    StructType,
    TypeRef,
    UnionType,
)

__all__ = ["samples"]

_TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


def samples(cls: type, max_depth: int = 3, max_items: int = 4) -> st.SearchStrategy[Any]:
    """Samples of cyclonedds class ``cls``."""
    described = describe(cls)
    return _Builder(described, max_depth, max_items).named(described.root, 0)


class _Builder:
    def __init__(self, described: Described, max_depth: int, max_items: int) -> None:
        self.d = described
        self.schema = described.schema
        self.max_depth = max_depth
        self.max_items = max_items

    def ref(self, ref: TypeRef, depth: int) -> st.SearchStrategy[Any]:
        resolved = self.schema.resolve(ref)
        if isinstance(resolved, PrimitiveType):
            return _primitive(resolved.kind)
        if isinstance(resolved, StringType):
            text = st.text(_TEXT, max_size=min(resolved.bound or 12, 12))
            if resolved.bound is not None:
                bound = resolved.bound
                return text.filter(lambda s: len(s.encode("utf-8")) <= bound)
            return text
        if isinstance(resolved, SequenceType):
            if depth >= self.max_depth:
                return st.just([])
            size = min(resolved.bound or self.max_items, self.max_items)
            return st.lists(self.ref(resolved.element, depth + 1), max_size=size)
        if isinstance(resolved, ArrayType):
            return self._array(resolved.element, list(resolved.dims), depth)
        assert isinstance(resolved, StructType | UnionType | EnumType)
        return self.named(resolved.name, depth)

    def _array(self, element: TypeRef, dims: list[int], depth: int) -> st.SearchStrategy[Any]:
        size = dims[0]
        resolved = self.schema.resolve(element)
        if len(dims) == 1:
            if isinstance(resolved, PrimitiveType) and resolved.kind in ("octet", "uint8"):
                return st.binary(min_size=size, max_size=size)
            inner = self.ref(element, depth + 1)
        else:
            inner = self._array(element, dims[1:], depth)
        return st.lists(inner, min_size=size, max_size=size)

    def named(self, name: str, depth: int) -> st.SearchStrategy[Any]:
        declared = self.schema.types[name]
        cls: Any = self.d.classes.get(name)
        if isinstance(declared, EnumType):
            return st.sampled_from(list(cls))
        if isinstance(declared, StructType):
            attributes = self.d.attributes[name]
            fields: dict[str, st.SearchStrategy[Any]] = {}
            for member in self.schema.all_members(declared):
                value = self.ref(member.type, depth + 1)
                if member.optional:
                    value = st.none() | value
                fields[attributes[member.name]] = value
            return st.builds(cls, **fields)
        assert isinstance(declared, UnionType)
        return self._union(declared, cls, depth)

    def _union(self, union: UnionType, cls: Any, depth: int) -> st.SearchStrategy[Any]:
        discriminator = self.schema.resolve(union.discriminator)
        if isinstance(discriminator, EnumType):
            enum_cls: Any = self.d.classes[discriminator.name]
            attributes = self.d.attributes[discriminator.name]

            def label_value(label: Any) -> Any:
                return enum_cls[attributes[label]]

            domain: list[Any] = list(enum_cls)
        else:
            def label_value(label: Any) -> Any:
                return label

            domain = _domain(discriminator)
        used = {label_value(label) for case in union.cases for label in case.labels}
        free = [value for value in domain if value not in used]
        options: list[st.SearchStrategy[Any]] = []
        for case in union.cases:
            value = self.ref(case.type, depth + 1)
            labels = [label_value(label) for label in case.labels]
            if case.is_default:
                labels = free[:3]
            for label in labels:
                options.append(value.map(lambda v, label=label: cls(discriminator=label, value=v)))
        if not any(case.is_default for case in union.cases) and free:
            options.append(st.just(cls(discriminator=free[0], value=None)))
        return st.one_of(options)


def _domain(discriminator: Any) -> list[Any]:
    assert isinstance(discriminator, PrimitiveType)
    if discriminator.kind == "boolean":
        return [False, True]
    if discriminator.kind == "char":
        return [chr(code) for code in range(32, 127)]
    low, high = INTEGER_RANGES[discriminator.kind]
    return list(range(max(low, -5), min(high, 40) + 1))


def _primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]
        return st.integers(low, high)
    if kind == "float32":
        return st.floats(width=32, allow_nan=False)
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "char":
        return st.characters(max_codepoint=127)
    assert kind == "wchar"
    return st.integers(0, 0x7FFF).filter(lambda code: not 0xD800 <= code <= 0xDFFF)
