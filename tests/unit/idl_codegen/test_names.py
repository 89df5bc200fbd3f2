"""Names that differ only in case: refused where Cyclone's idlc refuses them, with the
position of both names, and generated where idlc accepts them (cases in ``name_cases``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import idl_codegen
from idl_codegen.diagnostics import IdlErrors
from idl_codegen.frontend import compile_idl
from idl_codegen.generate import generate
from tests.unit.idl_codegen.name_cases import NAME_CASES, NameCase

_REFUSED = [case for case in NAME_CASES if case.error is not None]
_ACCEPTED = [case for case in NAME_CASES if case.error is None]


def _write(tmp_path: Path, case: NameCase) -> Path:
    path = tmp_path / "t.idl"
    path.write_text(case.idl + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("case", _REFUSED, ids=[case.name for case in _REFUSED])
def test_refused_with_both_positions(tmp_path: Path, case: NameCase) -> None:
    path = _write(tmp_path, case)
    with pytest.raises(IdlErrors) as caught:
        compile_idl([path])
    found = [str(error).replace(str(path), "t.idl") for error in caught.value.errors]
    assert found == [case.error]


@pytest.mark.parametrize("case", _ACCEPTED, ids=[case.name for case in _ACCEPTED])
def test_accepted_cases_generate_and_load(tmp_path: Path, case: NameCase) -> None:
    path = _write(tmp_path, case)
    generated = generate([path])
    assert generated.files
    loaded = idl_codegen.load(path)
    for name, cls in loaded.types.items():
        if name in loaded.topic_types:
            codec = loaded.codec(name)
            assert codec.from_json(codec.to_json(cls())) == cls()


def test_modules_differing_in_case_are_two_packages(tmp_path: Path) -> None:
    path = _write(tmp_path, next(case for case in NAME_CASES
                                 if case.name == "modules differing in case"))
    loaded = idl_codegen.load(path)
    assert sorted(loaded.types) == ["M::a", "m::A"]
    assert loaded.module("m").A is loaded["m::A"]
    assert loaded.module("M").a is loaded["M::a"]


def test_a_forward_declaration_takes_the_definitions_spelling(tmp_path: Path) -> None:
    path = _write(tmp_path, next(case for case in NAME_CASES if case.name ==
                                 "a forward declaration defined in another case"))
    schema = compile_idl([path]).schema
    assert sorted(schema.types) == ["m::S", "m::point"]
