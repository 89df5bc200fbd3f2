"""IDL that the generator refuses, with file:line:col, because a part of the chain
(the JSON mapping, cyclonedds-python, Cyclone DDS) cannot carry it; and the same shapes
in hand-written cyclonedds classes, which ``codec_for`` refuses."""

import typing
from collections.abc import Callable
from pathlib import Path

import cyclonedds.idl as idl
import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as types
import pytest
from click.testing import CliRunner

import idl_codegen
from idl_codegen.cli import main

Write = Callable[..., Path]


def errors_of(path: Path, outdir: Path) -> list[str]:
    result = CliRunner().invoke(main, [str(path), "-o", str(outdir), "-q"])
    assert result.exit_code == 1, result.output
    assert not outdir.exists()
    return result.stderr.splitlines()


def test_a_union_member_named_discriminator_is_refused(write_idl: Write, tmp_path: Path) -> None:
    path = write_idl("module m {\n"
                     "  union U switch (long) { case 1: long discriminator; case 2: long v; };\n"
                     "  union V switch (long) { case 1: long _discriminator; };\n"
                     "  struct S { U u; };\n"
                     "};\n")
    reason = ("a union member cannot be named 'discriminator': the JSON mapping writes the "
              "union's discriminator under that key; rename the member")
    assert errors_of(path, tmp_path / "out") == [
        f"{path}:2:40: {reason}", f"{path}:3:40: {reason}", "idl-codegen: 2 errors"]
    with pytest.raises(idl_codegen.IdlErrors):
        idl_codegen.load(path)
    # a struct member of that name is fine
    ok = write_idl("struct S { long discriminator; };", "ok.idl")
    assert idl_codegen.load(ok)  # no error


def test_a_union_with_only_a_default_case_is_refused(write_idl: Write, tmp_path: Path) -> None:
    path = write_idl("module mud {\n"
                     "  union UD switch (long) { default: long only; };\n"
                     "  @final struct S { @key long k; UD u; };\n"
                     "};\n")
    assert errors_of(path, tmp_path / "out") == [
        f"{path}:2:9: union 'mud::UD' has only a default case, which cyclonedds-python cannot "
        "serialize; give it a case label", "idl-codegen: 1 error"]
    with pytest.raises(idl_codegen.IdlErrors):
        idl_codegen.load(path)


@annotate.final
class _DiscriminatorNamed(idl.IdlUnion, discriminator=types.int32, typename="h::DN"):
    discriminator_: typing.Annotated[int | None, types.case(1, types.int32)]
    annotate.member_name("discriminator_", "discriminator")
    v: typing.Annotated[int | None, types.case(2, types.int32)]


@annotate.final
class _DefaultOnly(idl.IdlUnion, discriminator=types.int32, typename="h::DO"):
    only: typing.Annotated[int | None, types.default(types.int32)]


def test_hand_written_classes_of_these_shapes_have_no_codec() -> None:
    with pytest.raises(TypeError, match="cannot be named 'discriminator'"):
        idl_codegen.codec_for(_DiscriminatorNamed)
    with pytest.raises(TypeError, match="only a default case"):
        idl_codegen.codec_for(_DefaultOnly)
