"""IDL that Cyclone DDS's idlc 0.10.2 refuses or reads differently than the generator
did: keys idlc refuses, and constant expressions. Expected messages and values are what
idlc gave for the same files (its error text is quoted in each message or comment)."""

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import idl_codegen
from idl_codegen.cli import main

Write = Callable[..., Path]


def errors_of(path: Path, outdir: Path) -> list[str]:
    result = CliRunner().invoke(main, [str(path), "-o", str(outdir), "-q"])
    assert result.exit_code == 1, result.output
    return result.stderr.splitlines()


def test_a_derived_struct_cannot_add_keys(write_idl: Write, tmp_path: Path) -> None:
    # idlc: "Derived struct is not allowed to expand on keys", whether the base has keys
    path = write_idl("module m {\n"
                     "  @final struct B1 { @key long k1; };\n"
                     "  @final struct B2 : B1 { @key long k2; string s; };\n"
                     "  @final struct N1 { long n; };\n"
                     "  @final struct N2 : N1 { @key long k; };\n"
                     "  @final struct D3 : B1 { string s; };\n"
                     "};\n")
    assert errors_of(path, tmp_path / "out") == [
        f"{path}:3:37: derived struct 'm::B2' cannot add the key 'k2': its keys are its "
        "base's (as idlc)",
        f"{path}:5:37: derived struct 'm::N2' cannot add the key 'k': its keys are its "
        "base's (as idlc)",
        "idl-codegen: 2 errors"]


def test_keys_idlc_does_not_support_are_refused(write_idl: Write, tmp_path: Path) -> None:
    # idlc: "Using sequence type / union type / array with string element type as part of
    # the key is currently unsupported", also through typedefs and key structs
    path = write_idl("module m {\n"
                     "  typedef sequence<long> LS;\n"
                     "  union U switch (long) { case 1: long a; };\n"
                     "  struct In { sequence<long> q; long z; };\n"
                     "  struct Keyed { @key long z; sequence<long> q; };\n"
                     "  struct S1 { @key sequence<long> a; };\n"
                     "  struct S2 { @key LS a; };\n"
                     "  struct S3 { @key U u; };\n"
                     "  struct S4 { @key string<5> a[2]; @key long b[2]; @key string c; };\n"
                     "  struct S5 { @key In i; };\n"
                     "  struct S6 { @key Keyed k; };\n"
                     "  struct S7 { sequence<long> a; long b; };\n"
                     "  #pragma keylist S7 a\n"
                     "};\n")
    assert errors_of(path, tmp_path / "out") == [
        f"{path}:6:35: key member 'a' of 'm::S1': a sequence (a) cannot be part of a key "
        "(as idlc)",
        f"{path}:7:23: key member 'a' of 'm::S2': a sequence (a) cannot be part of a key "
        "(as idlc)",
        f"{path}:8:22: key member 'u' of 'm::S3': a union (u) cannot be part of a key (as idlc)",
        f"{path}:9:30: key member 'a' of 'm::S4': an array of strings (a) cannot be part of "
        "a key (as idlc)",
        f"{path}:10:23: key member 'i' of 'm::S5': a sequence (i.q) cannot be part of a key "
        "(as idlc)",
        f"{path}:12:30: key member 'a' of 'm::S7': a sequence (a) cannot be part of a key "
        "(as idlc)",
        "idl-codegen: 6 errors"]


def test_constants_evaluate_as_idlc_evaluates_them(write_idl: Write) -> None:
    # idlc's #defines for this file: m_Z 0.500000, m_Y 4.500000, m_F 0.250000, m_C true,
    # m_D false, m_L 3, m_T true. Before: Z 0.0, Y 4.0, F 0.0, and true/false refused
    path = write_idl("module m {\n"
                     "  const double Z = 1/2;\n"
                     "  const double Y = 7/2 + 1;\n"
                     "  const float F = 1/4;\n"
                     "  const boolean C = true;\n"
                     "  const boolean D = false;\n"
                     "  const long L = 7/2;\n"
                     "  const boolean T = True;\n"
                     "  struct S { @default(1/2) double h; };\n"
                     "};\n")
    loaded = idl_codegen.load(path)
    assert loaded.constants == {"m::Z": 0.5, "m::Y": 4.5, "m::F": 0.25, "m::C": True,
                                "m::D": False, "m::L": 3, "m::T": True}
    assert loaded.types["m::S"]().h == 0.5


@pytest.mark.parametrize(("expression", "column"), [
    ("1e308*10", 20), ("1e400", 20), ("1" + "0" * 400 + " * 1.0", 20)])
def test_a_double_constant_that_overflows_is_refused(write_idl: Write, tmp_path: Path,
                                                      expression: str, column: int) -> None:
    # idlc: "Floating point expression overflows"; before, the constant was inf
    path = write_idl(f"module m {{\n  const double O = {expression};\n}};\n")
    assert errors_of(path, tmp_path / "out") == [
        f"{path}:2:{column}: floating point expression overflows", "idl-codegen: 1 error"]
