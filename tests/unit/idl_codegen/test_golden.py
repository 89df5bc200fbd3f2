"""Golden files: the exact output for the corpus, and the exact errors for bad IDL.

Regenerate after an intended change with ``EDGEBUS_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from broker_core.errors import IdlError
from idl_codegen.diagnostics import IdlErrors
from idl_codegen.generate import generate
from tests.unit.idl_codegen.corpus import CASES, ERRORS, EXPECTED, UPDATE_GOLDEN, generate_case


def _tree(root: Path) -> dict[str, str]:
    return {path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_output_matches_golden_files(case: str) -> None:
    generated = generate_case(case)
    expected_dir = EXPECTED / case
    if UPDATE_GOLDEN:
        shutil.rmtree(expected_dir, ignore_errors=True)
        for relative, content in generated.files.items():
            path = expected_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8", newline="\n")
    expected = _tree(expected_dir)
    assert sorted(generated.files) == sorted(expected)
    for relative, content in generated.files.items():
        assert content == expected[relative], relative


@pytest.mark.parametrize("case", sorted(CASES))
def test_output_is_deterministic(case: str) -> None:
    assert generate_case(case).files == generate_case(case).files


ERROR_CASES = sorted(path.stem for path in ERRORS.glob("*.idl"))


@pytest.mark.parametrize("case", ERROR_CASES)
def test_errors_match_golden_messages(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ERRORS)
    with pytest.raises(IdlErrors) as caught:
        generate([f"{case}.idl"])
    expected_file = ERRORS / f"{case}.expected"
    if UPDATE_GOLDEN:
        expected_file.write_text(str(caught.value) + "\n", encoding="utf-8")
    assert str(caught.value) + "\n" == expected_file.read_text(encoding="utf-8")
    assert isinstance(caught.value, IdlError)
    first = caught.value.errors[0]
    assert (caught.value.file, caught.value.line, caught.value.column) == (
        first.file, first.line, first.column)
