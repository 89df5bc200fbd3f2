"""Cyclone's idlc on the files of ``tests/unit/idl_codegen/annotation_params``: it
accepts what we accept and refuses what we refuse; where the reason is a name that cannot
be resolved, at the line and column we name.

Needs Debian's ``cyclonedds-tools`` (``idlc``, 0.10.2). Its messages: "Scoped name 'K'
cannot be resolved" (names in annotation parameters are looked up from the scope of the
annotation's declaration, the global scope for builtin annotations), "@default can only
set primitive types", "Cannot evaluate const as enumerator expression"; for a value that
does not fit or has the wrong type it names the constant's declaration instead.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.timeouts import unit
from tests.unit.idl_codegen.annotation_params import ANNOTATION_CASES, AnnotationCase

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("idlc") is None,
                       reason="needs idlc (apt-get install cyclonedds-tools)"),
]

_POSITION = re.compile(r"t\.idl:(\d+):(\d+): ")


@pytest.mark.parametrize("case", ANNOTATION_CASES, ids=[case.name for case in ANNOTATION_CASES])
def test_idlc_refuses_what_we_refuse(tmp_path: Path, case: AnnotationCase) -> None:
    (tmp_path / "t.idl").write_text(case.idl + "\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run(["idlc", "-x", "final", "-o", str(out), "t.idl"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=unit(30))
    if case.error is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode != 0
    if "cannot be resolved" in case.error or "unknown constant" in case.error:
        ours = _POSITION.match(case.error)
        theirs = _POSITION.search(result.stderr)
        assert ours is not None and theirs is not None, result.stderr
        assert theirs.groups() == ours.groups(), result.stderr
        assert "cannot be resolved" in result.stderr
