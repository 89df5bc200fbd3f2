"""Semantic resolution: scopes, typedefs, constants, unions, inheritance, keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from idl_codegen.diagnostics import IdlErrors
from idl_codegen.frontend import compile_idl
from idl_codegen.model import (
    ArrayType,
    Constant,
    EnumType,
    Member,
    NamedType,
    PrimitiveType,
    Schema,
    SequenceType,
    StringType,
    StructType,
    TypedefType,
    UnionCase,
    UnionType,
)

Write = Callable[..., Path]


def resolve(write_idl: Write, text: str) -> Schema:
    return compile_idl([write_idl(text)]).schema


def errors(write_idl: Write, text: str) -> list[str]:
    path = write_idl(text)
    with pytest.raises(IdlErrors) as caught:
        compile_idl([path])
    return [str(error).replace(str(path), "t.idl") for error in caught.value.errors]


def test_reopened_and_nested_modules_share_scopes(write_idl: Write) -> None:
    schema = resolve(write_idl, """
        module a { struct P { long x; }; module b { struct Q { P p; }; }; };
        module a { module b { struct R { Q q; a::P p2; ::a::b::Q q2; }; }; };
    """)
    assert schema.modules == ["a", "a::b"]
    r = schema.types["a::b::R"]
    assert isinstance(r, StructType)
    assert [m.type for m in r.members] == [NamedType("a::b::Q"), NamedType("a::P"),
                                           NamedType("a::b::Q")]


def test_primitive_spellings(write_idl: Write) -> None:
    schema = resolve(write_idl, """struct X {
        short a; unsigned short b; long c; unsigned long d; long long e;
        unsigned long long f; float g; double h; char i; wchar j; boolean k; octet l;
        int8 m; uint8 n; int16 o; uint16 p; int32 q; uint32 r; int64 s; uint64 t; };""")
    struct = schema.types["X"]
    assert isinstance(struct, StructType)
    kinds = ["int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64",
             "char", "wchar", "boolean", "octet", "int8", "uint8", "int16", "uint16", "int32",
             "uint32", "int64", "uint64"]
    assert [m.type for m in struct.members] == [PrimitiveType(k) for k in kinds]


def test_templates_arrays_and_typedef_chains(write_idl: Write) -> None:
    schema = resolve(write_idl, """module m {
        const long N = 3;
        typedef long Row[N];
        typedef Row Grid[2];
        typedef sequence<Row, N * 2> Rows;
        struct S { Grid g; string<N> t; sequence<string> ss; long cube[1][2][3]; Rows r; };
    };""")
    assert schema.types["m::Row"] == TypedefType("m::Row", ArrayType(PrimitiveType("int32"), (3,)))
    assert schema.types["m::Grid"] == TypedefType("m::Grid", ArrayType(NamedType("m::Row"), (2,)))
    assert schema.types["m::Rows"] == TypedefType(
        "m::Rows", SequenceType(NamedType("m::Row"), 6))
    struct = schema.types["m::S"]
    assert isinstance(struct, StructType)
    assert [m.type for m in struct.members] == [
        NamedType("m::Grid"), StringType(3), SequenceType(StringType()),
        ArrayType(PrimitiveType("int32"), (1, 2, 3)), NamedType("m::Rows")]
    assert schema.resolve(NamedType("m::Grid")) == ArrayType(NamedType("m::Row"), (2,))


def test_constant_expressions(write_idl: Write) -> None:
    schema = resolve(write_idl, """module m {
        const long A = 7;
        const long B = -A / 2;
        const long C = -A % 2;
        const unsigned short D = ~0;
        const long E = ~0;
        const unsigned long long F = (1 << 40) | (0xF0 >> 4) ^ 3 & 2;
        const double G = A / 2.0 + 1;
        const float H = 1e3;
        const string S = "a" "b";
        const char CH = '\\n';
        const boolean T = TRUE;
        enum Color { RED, GREEN };
        const Color FAV = GREEN;
        const Color FAV2 = Color::RED;
        const long ALIAS = A;
    };""")
    values = {name.split("::")[-1]: c.value for name, c in schema.constants.items()}
    assert values == {"A": 7, "B": -3, "C": -1, "D": 0xFFFF, "E": -1,
                      "F": (1 << 40) | ((0xF0 >> 4) ^ (3 & 2)), "G": 4.5, "H": 1000.0,
                      "S": "ab", "CH": "\n", "T": True, "FAV": "GREEN", "FAV2": "RED",
                      "ALIAS": 7}
    assert schema.constants["m::FAV"] == Constant("m::FAV", NamedType("m::Color"), "GREEN")


def test_enumerators_values_and_defaults(write_idl: Write) -> None:
    schema = resolve(write_idl, "enum E { A, @value(10) B, C, @default_literal D };")
    assert schema.types["E"] == EnumType("E", (("A", 0), ("B", 10), ("C", 11), ("D", 12)), "D")


def test_union_labels_and_default(write_idl: Write) -> None:
    schema = resolve(write_idl, """module m {
        enum K { X, Y, Z };
        union U switch (K) { case X: long x; case Y: case Z: string yz; };
        union V switch (int8) { case -1: long a; default: double other; };
        union W switch (@key unsigned short) { case 1+1: long two; };
        typedef long Disc;
        union T switch (Disc) { case -1: long neg; };
    };""")
    assert schema.types["m::U"] == UnionType("m::U", NamedType("m::K"), (
        UnionCase("x", PrimitiveType("int32"), ("X",)),
        UnionCase("yz", StringType(), ("Y", "Z"))))
    union_v = schema.types["m::V"]
    assert isinstance(union_v, UnionType)
    assert union_v.cases[1] == UnionCase("other", PrimitiveType("float64"), (), True)
    union_w = schema.types["m::W"]
    assert isinstance(union_w, UnionType)
    assert union_w.key_discriminator and union_w.cases[0].labels == (2,)
    union_t = schema.types["m::T"]
    assert isinstance(union_t, UnionType) and union_t.discriminator == NamedType("m::Disc")


def test_inheritance_keys_and_member_annotations(write_idl: Write) -> None:
    schema = resolve(write_idl, """module m {
        @appendable struct Base { @key long id; };
        struct Derived : Base { @optional string note; @id(7) long seven; @default(3) long d; };
        @mutable @nested @autoid(HASH) struct H { long a; };
        struct Keyed { long a; long b; };
        #pragma keylist Keyed b a
    };""")
    derived = schema.types["m::Derived"]
    assert isinstance(derived, StructType)
    assert derived.base == "m::Base" and derived.extensibility == "appendable"
    assert derived.members == (
        Member("note", StringType(), optional=True),
        Member("seven", PrimitiveType("int32"), member_id=7, default=0),
        Member("d", PrimitiveType("int32"), default=3))
    assert schema.key_names(derived) == ["id"]
    assert [m.name for m in schema.all_members(derived)] == ["id", "note", "seven", "d"]
    hashed = schema.types["m::H"]
    assert isinstance(hashed, StructType)
    assert (hashed.extensibility, hashed.nested, hashed.autoid) == ("mutable", True, "hash")
    keyed = schema.types["m::Keyed"]
    assert isinstance(keyed, StructType) and keyed.keylist == ("b", "a")


def test_recursion_through_sequences_after_forward_declaration(write_idl: Write) -> None:
    schema = resolve(write_idl, """module m {
        struct Node;
        typedef sequence<Node> Nodes;
        struct Node { Nodes children; sequence<Node> more; };
        union Tree switch (long) { case 0: sequence<Tree> kids; };
    };""")
    node = schema.types["m::Node"]
    assert isinstance(node, StructType)
    assert node.members[1].type == SequenceType(NamedType("m::Node"))
    assert list(schema.types) == ["m::Nodes", "m::Node", "m::Tree"]


def test_sources_and_origins(write_idl: Write) -> None:
    write_idl("module inc { struct I { long v; }; };", "inc.idl")
    main = write_idl('#include "inc.idl"\nmodule main { struct M { inc::I i; }; };', "main.idl")
    schema = compile_idl([main]).schema
    assert schema.sources == ["main.idl", "inc.idl"]
    assert schema.origins["inc::I"] == "inc.idl"
    assert schema.origins["main::M"] == "main.idl"


def test_semantic_errors(write_idl: Write) -> None:
    found = errors(write_idl, """module m {
        struct A { Missing x; };
        const long N = 1;
        struct B { N n; };
        struct C { long x; long X; };
        struct C2 { C2 self; };
        typedef long T; typedef long t;
        union U switch (double) { case 1: long a; };
        const octet O = -1;
        struct D { long arr[N - 1]; };
    };""")
    assert found == [
        "t.idl:2:20: unknown type 'Missing'",
        "t.idl:4:20: 'N' is a const, not a type",
        "t.idl:5:33: 'X' collides with member 'x' of struct 'm::C' declared at t.idl:5:25",
        "t.idl:6:24: struct 'm::C2' is not completely defined here; only a sequence can refer "
        "to it",
        "t.idl:7:38: 't' collides with 'T' declared at t.idl:7:22 (IDL names must differ in "
        "more than case)",
        "t.idl:8:25: float64 cannot be a union discriminator; use an integer, boolean or enum "
        "type",
        "t.idl:9:25: -1 does not fit in octet (0..255)",
        "t.idl:10:29: an array dimension must be a positive integer, got 0",
    ]


def test_warnings_do_not_stop_generation(write_idl: Write) -> None:
    compiled = compile_idl([write_idl("@foo struct S { @must_understand long a; wstring w; };\n"
                                      "#pragma frobnicate")])
    assert [w.message for w in compiled.warnings] == [
        "unknown annotation '@foo' ignored",
        "@must_understand is not supported; ignored",
        "wstring is mapped to a UTF-8 string: cyclonedds-python has no wide strings",
        "#pragma frobnicate ignored",
    ]
