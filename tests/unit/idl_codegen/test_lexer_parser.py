"""Lexer and parser: tokens, the syntax tree, and error messages with recovery."""

from __future__ import annotations

import pytest

from idl_codegen.diagnostics import Diagnostics
from idl_codegen.lexer import TokenKind, tokenize
from idl_codegen.parser import parse
from idl_codegen.preprocess import PreprocessedSource
from idl_codegen.syntax import (
    Binary,
    ConstDef,
    EnumDef,
    Literal,
    ModuleDef,
    NamedSpec,
    Pragma,
    SequenceSpec,
    Specification,
    StringSpec,
    StructDef,
    TypedefDef,
    UnionDef,
)


def source(text: str) -> PreprocessedSource:
    lines = text.split("\n")
    return PreprocessedSource(lines, [("t.idl", n + 1) for n in range(len(lines))])


def parsed(text: str) -> tuple[Specification, list[str]]:
    diagnostics = Diagnostics()
    spec = parse(tokenize(source(text), diagnostics), diagnostics)
    return spec, [str(error) for error in diagnostics.errors]


def test_tokens_carry_kind_value_and_position() -> None:
    diagnostics = Diagnostics()
    tokens = tokenize(source("x _struct 0x1F 017 42 1.5e2 'a' L'b' \"s\\n\" L\"w\" :: >> @"),
                      diagnostics)
    assert diagnostics.errors == []
    summary = [(t.kind, t.value) for t in tokens]
    assert summary == [
        (TokenKind.IDENT, "x"), (TokenKind.IDENT, "struct"), (TokenKind.INT, 31),
        (TokenKind.INT, 15), (TokenKind.INT, 42), (TokenKind.FLOAT, 150.0),
        (TokenKind.CHAR, "a"), (TokenKind.WCHAR, "b"), (TokenKind.STRING, "s\n"),
        (TokenKind.WSTRING, "w"), (TokenKind.PUNCT, "::"), (TokenKind.PUNCT, ">>"),
        (TokenKind.PUNCT, "@"), (TokenKind.EOF, None),
    ]
    assert tokens[1].escaped
    assert (tokens[2].location.line, tokens[2].location.column) == (1, 11)


@pytest.mark.parametrize(("text", "message"), [
    ("12ab", "t.idl:1:1: invalid number '12ab'"),
    ("long $x;", "t.idl:1:6: unexpected character '$'"),
    ('"open', "t.idl:1:1: unterminated string literal"),
    ("'ab'", "t.idl:1:1: a character literal holds exactly one character"),
    (r"'\q'", r"t.idl:1:1: unknown escape sequence '\q'"),
])
def test_lexer_errors(text: str, message: str) -> None:
    diagnostics = Diagnostics()
    tokenize(source(text), diagnostics)
    assert [str(error) for error in diagnostics.errors] == [message]


def test_parses_the_constructs_dds_schemas_use() -> None:
    spec, errors = parsed("""
        module a { module b {
          @final struct S : Base { @key long id, other[2][3]; sequence<sequence<octet, 4>> s; };
          union U switch (@key E) { case A: case B: string<8> x; default: long y; };
          enum E { @value(3) A, B };
          typedef ::a::S T1, T2[4];
          const unsigned long long K = (1 << 4) | ~0x0F;
          struct F;
        }; };
        #pragma keylist S id
    """)
    assert errors == []
    outer = spec.definitions[0]
    assert isinstance(outer, ModuleDef)
    inner = outer.definitions[0]
    assert isinstance(inner, ModuleDef)
    struct, union, enum, typedef, const, forward = inner.definitions
    assert isinstance(struct, StructDef) and struct.base is not None
    assert str(struct.base) == "Base"
    assert struct.members is not None
    assert [d.name for d in struct.members[0].declarators] == ["id", "other"]
    assert len(struct.members[0].declarators[1].dims) == 2
    assert isinstance(struct.members[1].type_spec, SequenceSpec)
    assert isinstance(struct.members[1].type_spec.element, SequenceSpec)
    assert isinstance(union, UnionDef) and [a.name for a in union.switch_annotations] == ["key"]
    assert [len(case.labels) for case in union.cases] == [2, 1]
    assert union.cases[1].labels == [None]
    assert isinstance(union.cases[0].type_spec, StringSpec)
    assert isinstance(enum, EnumDef) and [e.name for e in enum.enumerators] == ["A", "B"]
    assert isinstance(typedef, TypedefDef) and isinstance(typedef.type_spec, NamedSpec)
    assert str(typedef.type_spec.name) == "::a::S"
    assert isinstance(const, ConstDef) and isinstance(const.value, Binary)
    assert isinstance(forward, StructDef) and forward.members is None
    assert isinstance(spec.definitions[1], Pragma)
    assert spec.definitions[1].words == ["keylist", "S", "id"]


def test_annotations_with_named_parameters_and_concatenated_strings() -> None:
    spec, errors = parsed('@verbatim (language="comment", text= "a" "b")\n'
                          "struct S { @default (value=1.5) double d; @id(2) long l; };")
    assert errors == []
    struct = spec.definitions[0]
    assert isinstance(struct, StructDef) and struct.members is not None
    verbatim = struct.annotations[0]
    assert verbatim.name == "verbatim"
    assert [key for key, _ in verbatim.params] == ["language", "text"]
    text = verbatim.params[1][1]
    assert isinstance(text, Literal) and text.value == "ab"
    assert struct.members[0].annotations[0].name == "default"


def test_annotation_declarations_are_skipped() -> None:
    spec, errors = parsed("@annotation range { double min; double max; };\nstruct S { long x; };")
    assert errors == []
    assert [type(d).__name__ for d in spec.definitions] == ["StructDef"]


def test_nested_template_closers() -> None:
    _, errors = parsed("struct S { sequence<sequence<long, 2>> a; sequence<string<3>> b; };")
    assert errors == []


def test_syntax_errors_are_reported_together_after_recovery() -> None:
    _, errors = parsed("struct A { long x long y; };\n"
                       "enum E { RED GREEN };\n"
                       "struct B { long 5; };\n"
                       "struct C { long z; }\n"
                       "struct D { long w; };\n"
                       "interface I { void f(); };\n"
                       "struct E2 { any a; map<long, long> m; };\n"
                       "const long = 1;")
    assert errors == [
        "t.idl:1:19: expected ';' after member declaration, got 'long'",
        "t.idl:2:14: expected ',' or '}' in enum 'E', got 'GREEN'",
        "t.idl:3:17: expected a member name, got integer literal 5",
        "t.idl:5:1: expected ';' after struct 'C', got 'struct'",
        "t.idl:6:1: 'interface' declarations are not supported",
        "t.idl:7:13: 'any' is not supported",
        "t.idl:7:20: 'map' is not supported by cyclonedds-python",
        "t.idl:8:12: expected a constant name, got '='",
    ]


def test_enum_with_a_trailing_comma_is_a_syntax_error() -> None:
    """IDL 4's grammar (and Cyclone's idlc) allow no comma after the last enumerator."""
    spec, errors = parsed("module m {\n  enum E { ONE, TWO, };\n  struct S { E e; };\n};")
    assert errors == ["t.idl:2:22: expected an enumerator name after ',' in enum 'E', got '}'"]
    assert len(spec.definitions) == 1


def test_keywords_are_not_names_unless_escaped() -> None:
    _, errors = parsed("struct long { long x; };")
    assert errors == ["t.idl:1:8: expected a struct name, got keyword 'long'"]
    spec, errors = parsed("struct _long { long _struct; };")
    assert errors == []
    struct = spec.definitions[0]
    assert isinstance(struct, StructDef) and struct.name == "long"


def test_end_of_input_inside_a_struct() -> None:
    _, errors = parsed("module m { struct S { long x;")
    assert errors == ["t.idl:1:30: expected '}' to close struct 'S', got end of input"]
