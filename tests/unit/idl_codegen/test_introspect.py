"""The description read back from cyclonedds classes equals the one the resolver built."""

from __future__ import annotations

import dataclasses

import pytest

import idl_codegen
from idl_codegen.frontend import compile_idl
from idl_codegen.introspect import describe
from idl_codegen.model import StringType, StructType, TypedefType, UnionType
from tests.unit.idl_codegen.corpus import CASES


@pytest.mark.parametrize("case", sorted(CASES))
def test_loaded_classes_describe_back_to_the_resolved_schema(case: str) -> None:
    files, include_dirs = CASES[case]
    resolved = compile_idl(files, include_dirs).schema
    loaded = idl_codegen.load(files, include_dirs=include_dirs)
    for name, cls in loaded.types.items():
        described = describe(cls)
        assert described.root == name
        for dependency, declared in described.schema.types.items():
            expected = resolved.types[dependency]
            if isinstance(expected, StructType):
                expected = _without_wide(expected)
            if isinstance(expected, UnionType):
                # cyclonedds needs the discriminator's class itself, not a typedef of it
                expected = dataclasses.replace(
                    expected, discriminator=resolved.resolve_named(expected.discriminator))
            assert declared == expected, dependency


def _without_wide(struct: StructType) -> StructType:
    """wstring has no cyclonedds type: it reads back as string."""
    members = tuple(dataclasses.replace(m, type=StringType(m.type.bound))
                    if isinstance(m.type, StringType) and m.type.wide else m
                    for m in struct.members)
    return dataclasses.replace(struct, members=members)


def test_describe_records_python_attributes_and_classes() -> None:
    files, include_dirs = CASES["kitchen"]
    loaded = idl_codegen.load(files, include_dirs=include_dirs)
    described = describe(loaded["kitchen::Keywords"])
    assert described.attributes["kitchen::Keywords"]["from"] == "from_"
    assert described.classes["kitchen::Keywords"] is loaded["kitchen::Keywords"]
    sink = describe(loaded["kitchen::Sink"])
    assert isinstance(sink.schema.types["kitchen::Hash"], TypedefType)
    assert set(sink.classes) >= {"kitchen::Sink", "kitchen::Inner", "kitchen::ByEnum",
                                 "kitchen::Color"}


def test_describe_rejects_what_is_not_a_cyclonedds_type() -> None:
    with pytest.raises(TypeError):
        describe(str)
