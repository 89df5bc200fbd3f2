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

from pathlib import Path

import pytest

from tests.interop.idl_codegen.idlc import POSITION, idlc_on, needs_idlc
from tests.unit.idl_codegen.annotation_params import ANNOTATION_CASES, AnnotationCase

pytestmark = [pytest.mark.interop, needs_idlc]


@pytest.mark.parametrize("case", ANNOTATION_CASES, ids=[case.name for case in ANNOTATION_CASES])
def test_idlc_refuses_what_we_refuse(tmp_path: Path, case: AnnotationCase) -> None:
    result = idlc_on(tmp_path, case.idl)
    if case.error is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode != 0
    if "cannot be resolved" in case.error or "unknown constant" in case.error:
        ours = POSITION.match(case.error)
        theirs = POSITION.search(result.stderr)
        assert ours is not None and theirs is not None, result.stderr
        assert theirs.groups() == ours.groups(), result.stderr
        assert "cannot be resolved" in result.stderr
